#pragma once
// CPU fp32 twin of src/kernels/gated_rmsnorm: the Mamba2 mixer's gated, grouped RMSNorm with the norm
// AFTER the gate (Megatron's norm_before_gate=False, HF's MambaRMSNormGated / Zamba2RMSNormGated):
//   g = y * silu(z);  per group of gs = D / G consecutive columns: r = rsqrt(mean(g^2) + eps);
//   out = weight * (g * r)
// y [T, D] contiguous; z strided (token t at z + t * z_stride: the z slice of the in_proj row);
// rstd [T, G] saved for the backward.
#include <cstdint>

namespace sg::ref {

void gated_rmsnorm_forward(float* out, float* rstd, const float* y, const float* z, int64_t z_stride,
                           const float* weight, int64_t T, int64_t D, int64_t G, float eps);

// dy [T, D] OVERWRITTEN; dz (strided like z) its D columns OVERWRITTEN; dweight [D] ADDED into.
void gated_rmsnorm_backward(float* dy, float* dz, int64_t dz_stride, float* dweight, const float* dout,
                            const float* y, const float* z, int64_t z_stride, const float* weight, const float* rstd,
                            int64_t T, int64_t D, int64_t G);

// Scalar-generic twins (float and double instantiated) for fp64 gradient checks.
template <class Real>
void gated_rmsnorm_forward_generic(Real* out, Real* rstd, const Real* y, const Real* z, int64_t z_stride,
                                   const Real* weight, int64_t T, int64_t D, int64_t G, Real eps);
template <class Real>
void gated_rmsnorm_backward_generic(Real* dy, Real* dz, int64_t dz_stride, Real* dweight, const Real* dout,
                                    const Real* y, const Real* z, int64_t z_stride, const Real* weight,
                                    const Real* rstd, int64_t T, int64_t D, int64_t G);

}  // namespace sg::ref
