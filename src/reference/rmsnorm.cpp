#include "reference/rmsnorm.h"

#include <cmath>

namespace sg::ref {

template <class Real>
void rmsnorm_forward_generic(Real* out, Real* rstd, const Real* in, const Real* weight, int64_t T, int64_t H,
                             Real eps) {
  for (int64_t t = 0; t < T; ++t) {
    const Real* x = in + t * H;
    // Sum of squares in double: the reference is the ground truth, so keep its own error negligible.
    double sum_sq = 0.0;
    for (int64_t h = 0; h < H; ++h) sum_sq += static_cast<double>(x[h]) * x[h];
    const Real r = static_cast<Real>(1.0 / std::sqrt(sum_sq / static_cast<double>(H) + static_cast<double>(eps)));
    rstd[t] = r;
    Real* y = out + t * H;
    for (int64_t h = 0; h < H; ++h) y[h] = weight[h] * (x[h] * r);
  }
}

// y_j = w_j x_j r with r = (mean(x^2) + eps)^(-1/2), so dr/dx_i = -r^3 x_i / H and
// dx_i = r w_i dy_i - (r^3 / H) x_i sum_j(dy_j w_j x_j);  dw_j = sum_t dy_j x_j r.
template <class Real>
void rmsnorm_backward_generic(Real* din, Real* dweight, const Real* dout, const Real* in, const Real* weight,
                              const Real* rstd, int64_t T, int64_t H) {
  for (int64_t t = 0; t < T; ++t) {
    const Real* x = in + t * H;
    const Real* dy = dout + t * H;
    const double r = rstd[t];
    double dot = 0.0;
    for (int64_t h = 0; h < H; ++h) dot += static_cast<double>(dy[h]) * weight[h] * x[h];
    const double coef = r * r * r * dot / static_cast<double>(H);
    Real* dx = din + t * H;
    for (int64_t h = 0; h < H; ++h) {
      dx[h] = static_cast<Real>(r * static_cast<double>(weight[h]) * dy[h] - coef * x[h]);
      dweight[h] += static_cast<Real>(static_cast<double>(dy[h]) * x[h] * r);
    }
  }
}

template void rmsnorm_forward_generic<float>(float*, float*, const float*, const float*, int64_t, int64_t, float);
template void rmsnorm_forward_generic<double>(double*, double*, const double*, const double*, int64_t, int64_t,
                                              double);
template void rmsnorm_backward_generic<float>(float*, float*, const float*, const float*, const float*,
                                              const float*, int64_t, int64_t);
template void rmsnorm_backward_generic<double>(double*, double*, const double*, const double*, const double*,
                                               const double*, int64_t, int64_t);

void rmsnorm_forward(float* out, float* rstd, const float* in, const float* weight, int64_t T, int64_t H,
                     float eps) {
  rmsnorm_forward_generic<float>(out, rstd, in, weight, T, H, eps);
}

void rmsnorm_backward(float* din, float* dweight, const float* dout, const float* in, const float* weight,
                      const float* rstd, int64_t T, int64_t H) {
  rmsnorm_backward_generic<float>(din, dweight, dout, in, weight, rstd, T, H);
}

void residual_rmsnorm_forward(float* residual_out, float* norm_out, float* rstd, const float* residual_in,
                              const float* delta, const float* weight, int64_t T, int64_t H, float eps) {
  for (int64_t i = 0; i < T * H; ++i) residual_out[i] = residual_in[i] + delta[i];
  rmsnorm_forward_generic<float>(norm_out, rstd, residual_out, weight, T, H, eps);
}

}  // namespace sg::ref
