#pragma once
// CPU fp32 twin of src/kernels/rmsnorm: HF RMSNorm y = w * (x * rsqrt(mean(x^2) + eps)), per row of H.
#include <cstdint>

namespace sg::ref {

// out, in [T, H]; weight [H]; rstd [T] receives rsqrt(mean(x^2) + eps) for the backward.
void rmsnorm_forward(float* out, float* rstd, const float* in, const float* weight, int64_t T, int64_t H,
                     float eps);

// din [T, H] is OVERWRITTEN; dweight [H] is ADDED into (dweight += sum_t dout * x * rstd).
void rmsnorm_backward(float* din, float* dweight, const float* dout, const float* in, const float* weight,
                      const float* rstd, int64_t T, int64_t H);

// The block's "add & norm": residual_out = residual_in + delta; norm_out = rmsnorm(residual_out).
// residual_out may alias residual_in (in-place residual stream).
void residual_rmsnorm_forward(float* residual_out, float* norm_out, float* rstd, const float* residual_in,
                              const float* delta, const float* weight, int64_t T, int64_t H, float eps);

// Scalar-generic twins (instantiated for float and double; the fp32 functions above call them) so tests
// can check the gradients against finite differences in fp64.
template <class Real>
void rmsnorm_forward_generic(Real* out, Real* rstd, const Real* in, const Real* weight, int64_t T, int64_t H,
                             Real eps);
template <class Real>
void rmsnorm_backward_generic(Real* din, Real* dweight, const Real* dout, const Real* in, const Real* weight,
                              const Real* rstd, int64_t T, int64_t H);

}  // namespace sg::ref
