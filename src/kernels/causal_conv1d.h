#pragma once
// The Mamba2 mixer's depthwise causal conv1d (width 4, with bias) + SiLU over the xBC channels:
//   out[b, t, c] = silu(bias[c] + sum_{k<4} weight[c, k] * in[b, t - 3 + k, c])   (in before t = 0 is 0),
// PyTorch's Conv1d(C, C, 4, groups=C, padding=3)[..., :S] then SiLU (Megatron's conv1d_weight [C, 1, 4]).
// bf16 activations and weights, fp32 arithmetic, bf16 out rounded once. CPU twin: reference/causal_conv1d.h.
//
// `in` may be a strided view so it can be the xBC slice of the in_proj output row [z | xBC | dt]: token
// (b, t) starts at in + (b * S + t) * in_row_stride (0 = packed, C). The backward writes d in into the same
// kind of view (the in_proj output gradient) and touches only its C columns.
//
// Layout: a thread owns 8 channels (16-byte vectors when C, the strides and the pointers allow; 1 channel
// otherwise) and a tile of consecutive tokens, sliding a 4-token window in registers. Kernels:
// causal_conv1d.cuh (also run by the CPU emulator of the tests).
//
// Deterministic weight gradients (no float atomics): the backward recomputes the pre-activation, and each
// of a fixed number of token slots (a function of B and S only) sums its dweight/dbias contributions in
// registers; the 8 slots of a block are added in a fixed order into one fp32 partial row of the scratch
// [causal_conv1d_backward_num_partials(B, S), 5C] = [C*4 dweight | C dbias], and the rows are then added
// in a fixed order into the fp32 main-grads (kernels/partial_sums.h). Plan the scratch with
// causal_conv1d_backward_scratch_bytes (the model's arena); it holds nothing between calls.
// Graph-safe: no allocation, no sync, no host reads of device memory.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "cuda/bf16.h"
#include "kernels/float_buffer.h"
#include "kernels/shape_limits.h"  // kCausalConv1dWidth

namespace sg::kernels {

struct CausalConv1dForwardParams {
  bf16* out = nullptr;           // [B, S, C], packed
  const bf16* in = nullptr;      // token (b, t) at in + (b * S + t) * in_row_stride; C columns read
  const bf16* weight = nullptr;  // [C, 4]
  const bf16* bias = nullptr;    // [C]
  int64_t B = 0, S = 0, C = 0;
  int64_t in_row_stride = 0;     // elements between consecutive tokens of `in`: 0 (packed, C) or >= C
};
void causal_conv1d_silu_forward(cudaStream_t stream, const CausalConv1dForwardParams& p);

// din = d in (its C columns of every token OVERWRITTEN, other columns untouched); dweight, dbias ADDED into.
// din must not alias in or dout.
struct CausalConv1dBackwardParams {
  bf16* din = nullptr;           // token (b, t) at din + (b * S + t) * din_row_stride
  FloatBuffer dweight;           // [C, 4] main_grad (fp32 or bf16, kernels/float_buffer.h), ADDED into
  FloatBuffer dbias;             // [C] main_grad (fp32 or bf16), ADDED into
  float* scratch = nullptr;      // fp32 [causal_conv1d_backward_num_partials(B, S), 5C]
  size_t scratch_bytes = 0;      // size of `scratch` (checked >= causal_conv1d_backward_scratch_bytes)
  const bf16* dout = nullptr;    // [B, S, C], packed
  const bf16* in = nullptr;      // the forward input (strided, in_row_stride)
  const bf16* weight = nullptr;  // [C, 4]
  const bf16* bias = nullptr;    // [C]
  int64_t B = 0, S = 0, C = 0;
  int64_t in_row_stride = 0;     // 0 (packed) or >= C
  int64_t din_row_stride = 0;    // 0 (packed) or >= C
};
void causal_conv1d_silu_backward(cudaStream_t stream, const CausalConv1dBackwardParams& p);

// Partial-sum rows of the backward's scratch (depends on B and S only, so the order of the weight-gradient
// sums, hence their bits, is fixed for a shape); 0 when B * S == 0.
int64_t causal_conv1d_backward_num_partials(int64_t B, int64_t S);
// Bytes of fp32 scratch the backward needs: num_partials(B, S) * 5C * 4.
size_t causal_conv1d_backward_scratch_bytes(int64_t B, int64_t S, int64_t C);

}  // namespace sg::kernels
