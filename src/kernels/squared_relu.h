#pragma once
// Squared ReLU, Nemotron-H's non-gated MLP activation (Megatron's squared_relu, HF's "relu2"):
// out = relu(x)^2, din = dout * 2 relu(x), in fp32 from bf16, rounded to bf16 once. CPU twin:
// reference/squared_relu.h. Elementwise over T * F values, 16-byte vectors when the count is a multiple of
// 8 and the pointers are 16-byte aligned. out may alias in, din may alias dout.
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/bf16.h"

namespace sg::kernels {

struct SquaredReluForwardParams {
  bf16* out = nullptr;       // [T, F]
  const bf16* in = nullptr;  // [T, F]
  int64_t T = 0, F = 0;
};
void squared_relu_forward(cudaStream_t stream, const SquaredReluForwardParams& p);

struct SquaredReluBackwardParams {
  bf16* din = nullptr;         // [T, F], overwritten
  const bf16* dout = nullptr;  // [T, F]
  const bf16* in = nullptr;    // [T, F], the forward input
  int64_t T = 0, F = 0;
};
void squared_relu_backward(cudaStream_t stream, const SquaredReluBackwardParams& p);

}  // namespace sg::kernels
