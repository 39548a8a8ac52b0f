#pragma once
// Unpermute/combine of a Mixture-of-Experts layer: each token's kept expert-output rows, weighted by
// their routing probs, summed in slot order (fp32, no atomics), and the backward. Maps from
// kernels/moe_permute.h; CPU twin: reference/moe_combine.h.
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/bf16.h"

namespace sg::kernels {

struct MoeCombineForwardParams {
  bf16* out = nullptr;                   // [T, H] OVERWRITTEN
  const bf16* expert_out = nullptr;      // [rows, H] the experts' output in permuted order
  const float* probs = nullptr;          // [T, k] from moe_router_forward
  const int32_t* slot_to_row = nullptr;  // [T * k] from moe_preprocess
  int64_t T = 0, k = 1, H = 0;
};
// One block per token: out[t] = sum_j probs[t k + j] expert_out[row of slot j] over kept slots.
void moe_combine_forward(cudaStream_t stream, const MoeCombineForwardParams& p);

struct MoeCombineBackwardParams {
  bf16* dexpert_out = nullptr;           // [rows, H] OVERWRITTEN: probs[slot] dout[token]; 0 for padding
  float* dprobs = nullptr;               // [T, k] OVERWRITTEN: <expert_out[row], dout[token]>; 0 if dropped
  const bf16* dout = nullptr;            // [T, H]
  const bf16* expert_out = nullptr;      // [rows, H], the forward input
  const float* probs = nullptr;          // [T, k]
  const int32_t* slot_to_row = nullptr;  // [T * k]
  const int32_t* row_to_slot = nullptr;  // [rows]
  int64_t T = 0, k = 1, H = 0, rows = 0;
};
// One block per row (each slot has one row, so each dprobs entry has one writer), plus blocks that
// zero dprobs of the dropped slots.
void moe_combine_backward(cudaStream_t stream, const MoeCombineBackwardParams& p);

}  // namespace sg::kernels
