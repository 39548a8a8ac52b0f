#include "reference/gated_rmsnorm.h"

#include <cmath>

#include "core/error.h"
#include "core/strings.h"

namespace sg::ref {
namespace {

template <class Real>
Real sigmoid(Real x) {
  return Real(1) / (Real(1) + std::exp(-x));
}

void check_groups(int64_t D, int64_t G) {
  SG_CHECK(G > 0 && D % G == 0, strprintf("gated_rmsnorm: d_inner %lld is not divisible into %lld groups "
                                          "(mamba_num_groups must divide d_inner)",
                                          static_cast<long long>(D), static_cast<long long>(G)));
}

}  // namespace

template <class Real>
void gated_rmsnorm_forward_generic(Real* out, Real* rstd, const Real* y, const Real* z, int64_t z_stride,
                                   const Real* weight, int64_t T, int64_t D, int64_t G, Real eps) {
  check_groups(D, G);
  const int64_t gs = D / G;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t grp = 0; grp < G; ++grp) {
      const int64_t c0 = grp * gs;
      double sum_sq = 0.0;  // in double: the reference's own rounding stays negligible
      for (int64_t c = c0; c < c0 + gs; ++c) {
        const Real zc = z[t * z_stride + c];
        const double g = static_cast<double>(y[t * D + c] * (zc * sigmoid(zc)));
        sum_sq += g * g;
      }
      const Real r = static_cast<Real>(1.0 / std::sqrt(sum_sq / static_cast<double>(gs) + static_cast<double>(eps)));
      rstd[t * G + grp] = r;
      for (int64_t c = c0; c < c0 + gs; ++c) {
        const Real zc = z[t * z_stride + c];
        const Real g = y[t * D + c] * (zc * sigmoid(zc));
        out[t * D + c] = weight[c] * (g * r);
      }
    }
}

// With n = g r and dn = dout * w:  dg = r (dn - n mean(dn n)) (the RMSNorm backward per group), then
// dy = dg silu(z), dz = dg y silu'(z), silu'(z) = sig(z) (1 + z (1 - sig(z))); dweight += dout n.
template <class Real>
void gated_rmsnorm_backward_generic(Real* dy, Real* dz, int64_t dz_stride, Real* dweight, const Real* dout,
                                    const Real* y, const Real* z, int64_t z_stride, const Real* weight,
                                    const Real* rstd, int64_t T, int64_t D, int64_t G) {
  check_groups(D, G);
  const int64_t gs = D / G;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t grp = 0; grp < G; ++grp) {
      const int64_t c0 = grp * gs;
      const double r = rstd[t * G + grp];
      double dot = 0.0;
      for (int64_t c = c0; c < c0 + gs; ++c) {
        const Real zc = z[t * z_stride + c];
        const double n = static_cast<double>(y[t * D + c] * (zc * sigmoid(zc))) * r;
        dot += static_cast<double>(dout[t * D + c]) * weight[c] * n;
      }
      const double mean_dot = dot / static_cast<double>(gs);
      for (int64_t c = c0; c < c0 + gs; ++c) {
        const Real zc = z[t * z_stride + c];
        const Real sig = sigmoid(zc);
        const Real yc = y[t * D + c];
        const double n = static_cast<double>(yc * (zc * sig)) * r;
        const double dg = r * (static_cast<double>(dout[t * D + c]) * weight[c] - n * mean_dot);
        dy[t * D + c] = static_cast<Real>(dg * static_cast<double>(zc * sig));
        const Real silu_grad = sig * (Real(1) + zc * (Real(1) - sig));
        dz[t * dz_stride + c] = static_cast<Real>(dg * static_cast<double>(yc * silu_grad));
        dweight[c] += static_cast<Real>(static_cast<double>(dout[t * D + c]) * n);
      }
    }
}

template void gated_rmsnorm_forward_generic<float>(float*, float*, const float*, const float*, int64_t, const float*,
                                                   int64_t, int64_t, int64_t, float);
template void gated_rmsnorm_forward_generic<double>(double*, double*, const double*, const double*, int64_t,
                                                    const double*, int64_t, int64_t, int64_t, double);
template void gated_rmsnorm_backward_generic<float>(float*, float*, int64_t, float*, const float*, const float*,
                                                    const float*, int64_t, const float*, const float*, int64_t,
                                                    int64_t, int64_t);
template void gated_rmsnorm_backward_generic<double>(double*, double*, int64_t, double*, const double*,
                                                     const double*, const double*, int64_t, const double*,
                                                     const double*, int64_t, int64_t, int64_t);

void gated_rmsnorm_forward(float* out, float* rstd, const float* y, const float* z, int64_t z_stride,
                           const float* weight, int64_t T, int64_t D, int64_t G, float eps) {
  gated_rmsnorm_forward_generic<float>(out, rstd, y, z, z_stride, weight, T, D, G, eps);
}

void gated_rmsnorm_backward(float* dy, float* dz, int64_t dz_stride, float* dweight, const float* dout,
                            const float* y, const float* z, int64_t z_stride, const float* weight, const float* rstd,
                            int64_t T, int64_t D, int64_t G) {
  gated_rmsnorm_backward_generic<float>(dy, dz, dz_stride, dweight, dout, y, z, z_stride, weight, rstd, T, D, G);
}

}  // namespace sg::ref
