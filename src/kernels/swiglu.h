#pragma once
// SwiGLU of the fused MLP input: gate_up row = [gate F | up F], out = silu(gate) * up, in fp32 from bf16,
// rounded to bf16. CPU twin: reference/swiglu.h. Elementwise, 16-byte vectors when F % 8 == 0 and the
// pointers are 16-byte aligned.
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/bf16.h"

namespace sg::kernels {

struct SwiGluForwardParams {
  bf16* out = nullptr;            // [T, F]
  const bf16* gate_up = nullptr;  // [T, 2F]
  int64_t T = 0, F = 0;
};
void swiglu_forward(cudaStream_t stream, const SwiGluForwardParams& p);

// dgate_up = [dgate | dup] (overwritten): dgate = dout up sig(g) (1 + g (1 - sig(g))), dup = dout silu(g).
struct SwiGluBackwardParams {
  bf16* dgate_up = nullptr;       // [T, 2F]
  const bf16* dout = nullptr;     // [T, F]
  const bf16* gate_up = nullptr;  // [T, 2F], the forward input
  int64_t T = 0, F = 0;
};
void swiglu_backward(cudaStream_t stream, const SwiGluBackwardParams& p);

}  // namespace sg::kernels
