#pragma once
// SiLU and its derivative in fp32 for device code (include from .cu files only); the CPU twins use the same
// formulas. silu(x) = x sig(x); silu'(x) = sig(x) (1 + x (1 - sig(x))).
#include <cuda_runtime.h>

namespace sg::kernels::detail {

__device__ __forceinline__ float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
__device__ __forceinline__ float silu(float x) { return x * sigmoid(x); }
__device__ __forceinline__ float silu_grad(float x) {
  const float s = sigmoid(x);
  return s * (1.0f + x * (1.0f - s));
}

}  // namespace sg::kernels::detail
