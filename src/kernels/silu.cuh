#pragma once
// SiLU and its derivative in fp32 for kernel code (include from .cu/.cuh files only; emulator-safe); the CPU
// twins use the same formulas. silu(x) = x sig(x); silu'(x) = sig(x) (1 + x (1 - sig(x))). One definition
// for every kernel that uses them (SwiGLU, Mamba's conv1d, gated RMSNorm, dt softplus).
//
// sig(x) = 1 / (1 + exp(-x)) through the hardware paths: __expf (ex2.approx; CUDA documents at most
// 2 + floor(|1.173 x|) ulp) and __fdividef (rcp.approx, 2 ulp; returns 0 for a denominator above 2^126,
// where sig < 2^-126 anyway). The IEEE expf and division cost ~30 instructions per element and made the
// SwiGLU kernels issue-bound; these are 4. Error, relative, against exact math:
//   sig:   <= (4.5 + 1.173 |x|) 2^-23            silu: <= (5 + 1.173 |x|) 2^-23
//   silu': <= (8 + 1.2 |x|) 2^-23 sig(x) (1 + 2 |x|) absolute (it has a zero at x ~ -1.28)
// i.e. ~1e-6 for |x| < 8, far below the bf16 rounding (2^-9) of the kernels' outputs (tests/kernels/
// silu_gpu_test.cu checks these bounds). The emulator evaluates the same formula with std::exp and an
// IEEE division.
#include <cmath>

#include "kernels/warp_mma.cuh"

namespace sg::kernels::detail {

#if defined(SG_SIMT_EMULATION)
inline float fast_reciprocal(float x) { return 1.0f / x; }
#else
SG_DEVICE float fast_reciprocal(float x) { return __fdividef(1.0f, x); }
#endif

SG_DEVICE float sigmoid(float x) { return fast_reciprocal(1.0f + fast_exp(-x)); }
SG_DEVICE float silu(float x) { return x * sigmoid(x); }
// SwiGLU's value, silu(gate) * up, in this order of operations (the SwiGLU kernel and the decoding linear's
// fused epilogue share it, so the two give the same bits).
SG_DEVICE float swiglu(float gate, float up) {
  return gate * sigmoid(gate) * up;
}
SG_DEVICE float silu_grad(float x) {
  const float s = sigmoid(x);
  return s * (1.0f + x * (1.0f - s));
}

}  // namespace sg::kernels::detail
