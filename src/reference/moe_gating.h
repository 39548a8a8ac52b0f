#pragma once
// CPU fp32 twin of src/kernels/moe_gating: the input gradient of the MoE router's fp32 gating linear
// logits = x Wg^T (the GPU rounds dx to bf16), and the plain gradient add the MoE layer's twin uses.
// The weight gradient's twin is reference/linear.h's linear_backward_weight (dw[E, H] += dlogits^T x).
#include <cstdint>

namespace sg::ref {

// dx[t, h] += sum_{e = 0..E-1} dlogits[t, e] w[e, h], summed with fmaf from 0 in expert order (the GPU's
// order: the fp32 sums agree bitwise).
void moe_gating_backward_input(float* dx, const float* dlogits, const float* w, int64_t T, int64_t E, int64_t H);
// dx[i] += add[i].
void moe_gating_add_grad(float* dx, const float* add, int64_t n);

}  // namespace sg::ref
