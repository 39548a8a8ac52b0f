#pragma once
// SiLU and its derivative in fp32 for kernel code (include from .cu/.cuh files only; emulator-safe); the CPU
// twins use the same formulas. silu(x) = x sig(x); silu'(x) = sig(x) (1 + x (1 - sig(x))).
#include <cmath>

#include "kernels/warp_mma.cuh"

namespace sg::kernels::detail {

SG_DEVICE float sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }
SG_DEVICE float silu(float x) { return x * sigmoid(x); }
SG_DEVICE float silu_grad(float x) {
  const float s = sigmoid(x);
  return s * (1.0f + x * (1.0f - s));
}

}  // namespace sg::kernels::detail
