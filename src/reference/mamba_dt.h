#pragma once
// CPU fp32 twin of src/kernels/mamba_dt: the Mamba2 mixer's per-head time step and decay.
//   dt[t, h] = clamp(softplus(dt_raw[t, h] + dt_bias[h]), dt_min, dt_max)   (Megatron's dt_limit)
//   softplus(x) = log1p(exp(x)) for x <= 20, x above (mamba_ssm's threshold)
//   A[h] = -exp(A_log[h])
// dt_raw is a strided view (token t at dt_raw + t * raw_stride: the dt slice of the in_proj row); dt is
// contiguous fp32 [T, H]. The clamp passes no gradient where it clips (value strictly outside the limit).
#include <cstdint>

namespace sg::ref {

// softplus with mamba_ssm's threshold (identity above 20), and its derivative.
template <class Real>
Real mamba_softplus(Real x);
template <class Real>
Real mamba_softplus_grad(Real x);

void mamba_dt_forward(float* dt, const float* dt_raw, int64_t raw_stride, const float* dt_bias, int64_t T,
                      int64_t H, float dt_min, float dt_max);

// ddt_raw (strided): the H columns of every token OVERWRITTEN; ddt_bias [H] ADDED into.
void mamba_dt_backward(float* ddt_raw, int64_t draw_stride, float* ddt_bias, const float* ddt, const float* dt_raw,
                       int64_t raw_stride, const float* dt_bias, int64_t T, int64_t H, float dt_min, float dt_max);

// A = -exp(A_log); dA_log += dA * A (dA/dA_log = -exp(A_log) = A).
void mamba_a_forward(float* A, const float* A_log, int64_t H);
void mamba_a_backward(float* dA_log, const float* dA, const float* A_log, int64_t H);

// Scalar-generic twins (float and double instantiated) for fp64 gradient checks.
template <class Real>
void mamba_dt_forward_generic(Real* dt, const Real* dt_raw, int64_t raw_stride, const Real* dt_bias, int64_t T,
                              int64_t H, Real dt_min, Real dt_max);
template <class Real>
void mamba_dt_backward_generic(Real* ddt_raw, int64_t draw_stride, Real* ddt_bias, const Real* ddt,
                               const Real* dt_raw, int64_t raw_stride, const Real* dt_bias, int64_t T, int64_t H,
                               Real dt_min, Real dt_max);

}  // namespace sg::ref
