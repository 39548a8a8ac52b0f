#pragma once
// CPU fp32 twin of src/kernels/moe_gating: the elementwise helpers of the MoE router's fp32 gating
// linear. In fp32 widening is a copy and the gradient add a plain sum (the GPU rounds the sum to bf16).
#include <cstdint>

namespace sg::ref {

// out[i] = in[i].
void moe_gating_widen(float* out, const float* in, int64_t n);
// dx[i] += add[i].
void moe_gating_add_grad(float* dx, const float* add, int64_t n);

}  // namespace sg::ref
