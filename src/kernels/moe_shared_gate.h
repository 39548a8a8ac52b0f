#pragma once
// The sigmoid gate of a MoE layer's shared expert (Megatron's moe_shared_expert_gate, Qwen2-MoE's
// shared_expert_gate, a [1, H] weight w): per token t of the normed input n [T, H] and the shared expert's output
// s [T, H],
//   forward:     g[t] = sigmoid(n[t] . w);   out[t] += g[t] s[t]
//   backward:    d_s[t] = g[t] dy[t];        d_logit[t] = (dy[t] . s[t]) g[t] (1 - g[t])
//   input grad:  d_n[t] += d_logit[t] w
// and the weight gradient dw += sum_t d_logit[t] n[t] is column_sums with row_scale = d_logit
// (kernels/column_sums.h). CPU twin: reference/moe_shared_gate.h. Kernels: moe_shared_gate.cuh (also run by the CPU
// emulator of the tests).
//
// Why hand-written: no library does a per-row dot product plus a gated add graph-safely in a fixed order; cuBLASLt
// would need N = 1 GEMMs (n w, and the row dots dy . s as a batched GEMV) plus separate elementwise passes for the
// sigmoid, the gated add and the scaled rows, each a round trip through memory. Here one block per token reads its
// rows once: each thread sums its 8-element chunks in order in fp32 (fused multiply-adds), then a fixed tree over the
// block (kernels/common.cuh block_reduce_sum) gives the dot. The order depends on H only (not on the alignment, the
// path or the GPU), there are no atomics, and nothing is allocated or synchronised: graph-safe.
// bf16 in memory, fp32 in registers; bf16 results are rounded once from fp32.
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/bf16.h"

namespace sg::kernels {

struct MoeSharedGateForwardParams {
  bf16* out = nullptr;           // [T, H] ADDED into: out[t] = round_bf16(out[t] + g[t] * shared[t]) (sum in fp32)
  float* gate = nullptr;         // [T] OVERWRITTEN: g[t] = sigmoid(input[t] . weight) in fp32 (the backward reads it)
  const bf16* shared = nullptr;  // [T, H] the shared expert's output
  const bf16* input = nullptr;   // [T, H] the layer's normed input
  const bf16* weight = nullptr;  // [H] the gate weight
  int64_t T = 0, H = 0;
};
// T may be 0 (nothing is launched; only weight must be set). out must not overlap the inputs.
void moe_shared_gate_forward(cudaStream_t stream, const MoeSharedGateForwardParams& p);

struct MoeSharedGateBackwardParams {
  bf16* d_shared = nullptr;      // [T, H] OVERWRITTEN: g[t] * dy[t]
  float* d_logit = nullptr;      // [T] OVERWRITTEN: (dy[t] . shared[t]) g[t] (1 - g[t])
  const bf16* dy = nullptr;      // [T, H] the gradient of the layer's output
  const bf16* shared = nullptr;  // [T, H]
  const float* gate = nullptr;   // [T] from the forward
  int64_t T = 0, H = 0;
};
// T may be 0 (nothing is launched). d_shared may be dy itself (each element is read before the same thread
// overwrites it); otherwise it must not overlap dy or shared.
void moe_shared_gate_backward(cudaStream_t stream, const MoeSharedGateBackwardParams& p);

struct MoeSharedGateInputGradParams {
  bf16* d_input = nullptr;         // [T, H] ADDED into: d_input[t] = round_bf16(d_input[t] + d_logit[t] * w) (fp32)
  const float* d_logit = nullptr;  // [T] from moe_shared_gate_backward
  const bf16* weight = nullptr;    // [H]
  int64_t T = 0, H = 0;
};
// T may be 0 (nothing is launched; only weight must be set).
void moe_shared_gate_input_grad(cudaStream_t stream, const MoeSharedGateInputGradParams& p);

}  // namespace sg::kernels
