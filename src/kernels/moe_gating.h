#pragma once
// The gradients of the MoE router's fp32 gating linear (logits = n Wg^T, Megatron's moe_router_dtype
// fp32) straight from the bf16 input and weight: fp32 products of the exact bf16 values, fp32 sums in a
// fixed order, no fp32 copies of n or Wg and no float atomics (bitwise reproducible).
// CPU twins: reference/moe_gating.h (input), reference/linear.h's linear_backward_weight (weight).
//
// backward_input   dn[t, h] = bf16(dn[t, h] + sum_{e = 0..E-1} dlogits[t, e] Wg[e, h])  (fmaf, e ascending;
//                  the twin's order, so the two agree bitwise)
// backward_weight  dWg[e, h] += sum_t dlogits[t, e] n[t, h] over token chunks: per chunk 32 token lanes sum
//                  their tokens in order and are summed in lane order; the chunks' partials (workspace) are
//                  then added in chunk order. The chunking is a plan-time function of (T, E, H).
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "cuda/bf16.h"
#include "kernels/float_buffer.h"

namespace sg::kernels {

struct MoeGatingBackwardInputParams {
  bf16* dx = nullptr;             // [T, H] dx = bf16(float(dx) + dlogits Wg), round to nearest even
  const float* dlogits = nullptr; // [T, E]
  const bf16* w = nullptr;        // [E, H] the gating weight
  int64_t T = 0, E = 0, H = 0;
};
void moe_gating_backward_input(cudaStream_t stream, const MoeGatingBackwardInputParams& p);

// Scratch of moe_gating_backward_weight (the token chunks' partial sums; 0 when one chunk suffices).
size_t moe_gating_backward_weight_workspace_bytes(int64_t T, int64_t E, int64_t H);

struct MoeGatingBackwardWeightParams {
  FloatBuffer dw;                 // [E, H] main_grad (fp32 or bf16): += dlogits^T x
  const float* dlogits = nullptr; // [T, E]
  const bf16* x = nullptr;        // [T, H] the gating linear's input
  int64_t T = 0, E = 0, H = 0;
  void* workspace = nullptr;      // moe_gating_backward_weight_workspace_bytes(T, E, H), 16-byte aligned
  size_t workspace_bytes = 0;
};
// Two launches when the tokens take more than one chunk (partials, then their fixed-order sum), else one.
void moe_gating_backward_weight(cudaStream_t stream, const MoeGatingBackwardWeightParams& p);

}  // namespace sg::kernels
