#include "reference/mamba_dt.h"

#include <cmath>

namespace sg::ref {

template <class Real>
Real mamba_softplus(Real x) {
  return x <= Real(20) ? std::log1p(std::exp(x)) : x;
}

template <class Real>
Real mamba_softplus_grad(Real x) {
  return x <= Real(20) ? Real(1) / (Real(1) + std::exp(-x)) : Real(1);
}

template <class Real>
void mamba_dt_forward_generic(Real* dt, const Real* dt_raw, int64_t raw_stride, const Real* dt_bias, int64_t T,
                              int64_t H, Real dt_min, Real dt_max) {
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < H; ++h) {
      const Real sp = mamba_softplus<Real>(dt_raw[t * raw_stride + h] + dt_bias[h]);
      dt[t * H + h] = std::fmin(std::fmax(sp, dt_min), dt_max);
    }
}

template <class Real>
void mamba_dt_backward_generic(Real* ddt_raw, int64_t draw_stride, Real* ddt_bias, const Real* ddt,
                               const Real* dt_raw, int64_t raw_stride, const Real* dt_bias, int64_t T, int64_t H,
                               Real dt_min, Real dt_max) {
  for (int64_t h = 0; h < H; ++h) {
    double bias_sum = 0.0;  // in double: the reference's own rounding stays negligible
    for (int64_t t = 0; t < T; ++t) {
      const Real pre = dt_raw[t * raw_stride + h] + dt_bias[h];
      const Real sp = mamba_softplus<Real>(pre);
      const bool clipped = sp < dt_min || sp > dt_max;
      const Real d = clipped ? Real(0) : ddt[t * H + h] * mamba_softplus_grad<Real>(pre);
      ddt_raw[t * draw_stride + h] = d;
      bias_sum += static_cast<double>(d);
    }
    ddt_bias[h] += static_cast<Real>(bias_sum);
  }
}

template float mamba_softplus<float>(float);
template double mamba_softplus<double>(double);
template float mamba_softplus_grad<float>(float);
template double mamba_softplus_grad<double>(double);
template void mamba_dt_forward_generic<float>(float*, const float*, int64_t, const float*, int64_t, int64_t, float,
                                              float);
template void mamba_dt_forward_generic<double>(double*, const double*, int64_t, const double*, int64_t, int64_t,
                                               double, double);
template void mamba_dt_backward_generic<float>(float*, int64_t, float*, const float*, const float*, int64_t,
                                               const float*, int64_t, int64_t, float, float);
template void mamba_dt_backward_generic<double>(double*, int64_t, double*, const double*, const double*, int64_t,
                                                const double*, int64_t, int64_t, double, double);

void mamba_dt_forward(float* dt, const float* dt_raw, int64_t raw_stride, const float* dt_bias, int64_t T,
                      int64_t H, float dt_min, float dt_max) {
  mamba_dt_forward_generic<float>(dt, dt_raw, raw_stride, dt_bias, T, H, dt_min, dt_max);
}

void mamba_dt_backward(float* ddt_raw, int64_t draw_stride, float* ddt_bias, const float* ddt, const float* dt_raw,
                       int64_t raw_stride, const float* dt_bias, int64_t T, int64_t H, float dt_min, float dt_max) {
  mamba_dt_backward_generic<float>(ddt_raw, draw_stride, ddt_bias, ddt, dt_raw, raw_stride, dt_bias, T, H, dt_min,
                                   dt_max);
}

void mamba_a_forward(float* A, const float* A_log, int64_t H) {
  for (int64_t h = 0; h < H; ++h) A[h] = -std::exp(A_log[h]);
}

void mamba_a_backward(float* dA_log, const float* dA, const float* A_log, int64_t H) {
  for (int64_t h = 0; h < H; ++h) dA_log[h] += dA[h] * -std::exp(A_log[h]);
}

}  // namespace sg::ref
