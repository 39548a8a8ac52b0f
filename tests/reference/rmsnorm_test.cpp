// RMSNorm reference: forward against its formula, backward against central finite differences in fp64,
// the fp32 entry points against the fp64 generic code, and the residual "add & norm".
#include "reference/rmsnorm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "test_util.h"

namespace sg {
namespace {

std::vector<double> to_double(const std::vector<float>& v) { return {v.begin(), v.end()}; }

// L = sum(G * rmsnorm(x, w)) evaluated in fp64.
double loss(const std::vector<double>& x, const std::vector<double>& w, const std::vector<double>& g, int64_t T,
            int64_t H, double eps) {
  std::vector<double> y(x.size()), rstd(T);
  ref::rmsnorm_forward_generic<double>(y.data(), rstd.data(), x.data(), w.data(), T, H, eps);
  double l = 0.0;
  for (size_t i = 0; i < y.size(); ++i) l += g[i] * y[i];
  return l;
}

TEST(RmsNormReference, ForwardMatchesFormula) {
  const int64_t T = 3, H = 5;
  const float eps = 1e-5f;
  const auto x = test::random_normal(T * H, 1);
  const auto w = test::random_normal(H, 2);
  std::vector<float> y(T * H), rstd(T);
  ref::rmsnorm_forward(y.data(), rstd.data(), x.data(), w.data(), T, H, eps);
  for (int64_t t = 0; t < T; ++t) {
    double ms = 0.0;
    for (int64_t h = 0; h < H; ++h) ms += double(x[t * H + h]) * x[t * H + h];
    const double r = 1.0 / std::sqrt(ms / H + eps);
    EXPECT_NEAR(rstd[t], r, 1e-6 * r);
    for (int64_t h = 0; h < H; ++h) EXPECT_NEAR(y[t * H + h], w[h] * x[t * H + h] * r, 1e-5);
  }
}

TEST(RmsNormReference, BackwardMatchesFiniteDifferencesFp64) {
  const int64_t T = 4, H = 7;
  const double eps = 1e-5;
  const auto x = to_double(test::random_normal(T * H, 11));
  const auto w = to_double(test::random_normal(H, 12));
  const auto g = to_double(test::random_normal(T * H, 13));
  std::vector<double> y(T * H), rstd(T), dx(T * H, -7.0), dw(H, 0.5);
  ref::rmsnorm_forward_generic<double>(y.data(), rstd.data(), x.data(), w.data(), T, H, eps);
  ref::rmsnorm_backward_generic<double>(dx.data(), dw.data(), g.data(), x.data(), w.data(), rstd.data(), T, H);
  const double step = 1e-6;
  for (int64_t i = 0; i < T * H; ++i) {
    auto xp = x, xm = x;
    xp[i] += step;
    xm[i] -= step;
    const double fd = (loss(xp, w, g, T, H, eps) - loss(xm, w, g, T, H, eps)) / (2 * step);
    EXPECT_NEAR(dx[i], fd, 1e-7 * (1.0 + std::fabs(fd))) << "din[" << i << "] (overwritten, not added)";
  }
  for (int64_t h = 0; h < H; ++h) {
    auto wp = w, wm = w;
    wp[h] += step;
    wm[h] -= step;
    const double fd = (loss(x, wp, g, T, H, eps) - loss(x, wm, g, T, H, eps)) / (2 * step);
    // dweight started at 0.5: the backward ADDS into it.
    EXPECT_NEAR(dw[h] - 0.5, fd, 1e-7 * (1.0 + std::fabs(fd))) << "dweight[" << h << "]";
  }
}

TEST(RmsNormReference, Fp32EntryPointsMatchFp64) {
  const int64_t T = 5, H = 64;
  const float eps = 1e-6f;
  const auto x = test::random_normal(T * H, 21);
  const auto w = test::random_normal(H, 22);
  const auto g = test::random_normal(T * H, 23);
  std::vector<float> y(T * H), rstd(T), dx(T * H), dw(H, 0.0f);
  ref::rmsnorm_forward(y.data(), rstd.data(), x.data(), w.data(), T, H, eps);
  ref::rmsnorm_backward(dx.data(), dw.data(), g.data(), x.data(), w.data(), rstd.data(), T, H);
  std::vector<double> yd(T * H), rd(T), dxd(T * H), dwd(H, 0.0);
  const auto xd = to_double(x), wd = to_double(w), gd = to_double(g);
  ref::rmsnorm_forward_generic<double>(yd.data(), rd.data(), xd.data(), wd.data(), T, H, eps);
  ref::rmsnorm_backward_generic<double>(dxd.data(), dwd.data(), gd.data(), xd.data(), wd.data(), rd.data(), T, H);
  auto as_float = [](const std::vector<double>& v) { return std::vector<float>(v.begin(), v.end()); };
  EXPECT_LT(test::relative_error(y, as_float(yd)), 1e-6);
  EXPECT_LT(test::relative_error(rstd, as_float(rd)), 1e-6);
  EXPECT_LT(test::relative_error(dx, as_float(dxd)), 1e-5);
  EXPECT_LT(test::relative_error(dw, as_float(dwd)), 1e-5);
}

TEST(RmsNormReference, ResidualAddThenNorm) {
  const int64_t T = 3, H = 16;
  const float eps = 1e-5f;
  const auto res = test::random_normal(T * H, 31);
  const auto delta = test::random_normal(T * H, 32);
  const auto w = test::random_normal(H, 33);
  std::vector<float> res_out(T * H), norm(T * H), rstd(T);
  ref::residual_rmsnorm_forward(res_out.data(), norm.data(), rstd.data(), res.data(), delta.data(), w.data(), T, H,
                                eps);
  std::vector<float> sum(T * H), norm_expected(T * H), rstd_expected(T);
  for (int64_t i = 0; i < T * H; ++i) sum[i] = res[i] + delta[i];
  ref::rmsnorm_forward(norm_expected.data(), rstd_expected.data(), sum.data(), w.data(), T, H, eps);
  EXPECT_EQ(res_out, sum);
  EXPECT_EQ(norm, norm_expected);
  EXPECT_EQ(rstd, rstd_expected);
  // In place on the residual stream (residual_out aliases residual_in) gives the same.
  auto stream = res;
  ref::residual_rmsnorm_forward(stream.data(), norm.data(), rstd.data(), stream.data(), delta.data(), w.data(), T,
                                H, eps);
  EXPECT_EQ(stream, sum);
  EXPECT_EQ(norm, norm_expected);
}

}  // namespace
}  // namespace sg
