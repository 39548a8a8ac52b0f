// dt / A reference: softplus values and threshold, the dt_limit clamp, the backward against fp64 central
// finite differences (strided views, clipped entries, dt_bias added), A = -exp(A_log) and its gradient.
#include "reference/mamba_dt.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "test_util.h"

namespace sg {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

TEST(MambaDtReference, ForwardKnownValues) {
  // T=1, H=4: raw + bias = 0, -2, 25 (above the softplus threshold: identity), 1.
  const std::vector<float> raw = {0.5f, -1.0f, 24.0f, 3.0f};
  const std::vector<float> bias = {-0.5f, -1.0f, 1.0f, -2.0f};
  std::vector<float> dt(4);
  ref::mamba_dt_forward(dt.data(), raw.data(), 4, bias.data(), 1, 4, 0.0f, kInf);
  EXPECT_NEAR(dt[0], std::log(2.0), 1e-7);
  EXPECT_NEAR(dt[1], std::log1p(std::exp(-2.0)), 1e-7);
  EXPECT_EQ(dt[2], 25.0f);
  EXPECT_NEAR(dt[3], std::log1p(std::exp(1.0)), 1e-6);
  // dt_limit (0.2, 1.0): 0.693 passes, 0.127 -> 0.2, 25 -> 1.0, 1.313 -> 1.0.
  ref::mamba_dt_forward(dt.data(), raw.data(), 4, bias.data(), 1, 4, 0.2f, 1.0f);
  EXPECT_NEAR(dt[0], std::log(2.0), 1e-7);
  EXPECT_EQ(dt[1], 0.2f);
  EXPECT_EQ(dt[2], 1.0f);
  EXPECT_EQ(dt[3], 1.0f);
}

TEST(MambaDtReference, BackwardMatchesFiniteDifferencesFp64) {
  const int64_t T = 9, H = 5, raw_stride = 8, draw_stride = 11;
  const double lo = 0.3, hi = 1.5;
  const auto raw_f = test::random_normal(T * raw_stride, 71, 1.5f);
  const auto bias_f = test::random_normal(H, 72, 0.5f);
  const auto g_f = test::random_normal(T * H, 73);
  const std::vector<double> raw(raw_f.begin(), raw_f.end()), bias(bias_f.begin(), bias_f.end()),
      g(g_f.begin(), g_f.end());
  auto loss = [&](const std::vector<double>& r, const std::vector<double>& b) {
    std::vector<double> dt(T * H);
    ref::mamba_dt_forward_generic<double>(dt.data(), r.data(), raw_stride, b.data(), T, H, lo, hi);
    double l = 0.0;
    for (size_t i = 0; i < dt.size(); ++i) l += g[i] * dt[i];
    return l;
  };
  constexpr double kSentinel = 77.0;
  std::vector<double> draw(T * draw_stride, kSentinel), dbias(H, 2.0);
  ref::mamba_dt_backward_generic<double>(draw.data(), draw_stride, dbias.data(), g.data(), raw.data(), raw_stride,
                                         bias.data(), T, H, lo, hi);
  const double step = 1e-6;
  int clipped_low = 0, clipped_high = 0, passed = 0;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t c = 0; c < draw_stride; ++c) {
      if (c >= H) {
        EXPECT_EQ(draw[t * draw_stride + c], kSentinel) << "column " << c << " outside the view was written";
        continue;
      }
      const double sp = ref::mamba_softplus<double>(raw[t * raw_stride + c] + bias[c]);
      ASSERT_GT(std::fabs(sp - lo), 1e-4) << "test input too close to the clamp";
      ASSERT_GT(std::fabs(sp - hi), 1e-4) << "test input too close to the clamp";
      (sp < lo ? clipped_low : sp > hi ? clipped_high : passed)++;
      auto rp = raw, rm = raw;
      rp[t * raw_stride + c] += step;
      rm[t * raw_stride + c] -= step;
      const double fd = (loss(rp, bias) - loss(rm, bias)) / (2 * step);
      EXPECT_NEAR(draw[t * draw_stride + c], fd, 1e-7 * (1.0 + std::fabs(fd))) << "t=" << t << " h=" << c;
    }
  EXPECT_GT(clipped_low, 0);
  EXPECT_GT(clipped_high, 0);
  EXPECT_GT(passed, 0);
  for (int64_t h = 0; h < H; ++h) {
    auto bp = bias, bm = bias;
    bp[h] += step;
    bm[h] -= step;
    const double fd = (loss(raw, bp) - loss(raw, bm)) / (2 * step);
    EXPECT_NEAR(dbias[h] - 2.0, fd, 1e-7 * (1.0 + std::fabs(fd))) << "ddt_bias[" << h << "] (added into 2.0)";
  }
}

TEST(MambaDtReference, SoftplusThresholdAndGradient) {
  EXPECT_EQ(ref::mamba_softplus<double>(20.5), 20.5);
  EXPECT_EQ(ref::mamba_softplus_grad<double>(20.5), 1.0);
  EXPECT_NEAR(ref::mamba_softplus<double>(20.0), 20.0, 3e-9);  // continuous across the threshold
  EXPECT_NEAR(ref::mamba_softplus_grad<double>(0.0), 0.5, 1e-15);
  EXPECT_NEAR(ref::mamba_softplus_grad<double>(-3.0), 1.0 / (1.0 + std::exp(3.0)), 1e-15);
}

TEST(MambaDtReference, AAndItsGradient) {
  const std::vector<float> A_log = {0.0f, std::log(16.0f), -0.5f};
  std::vector<float> A(3), dA_log = {1.0f, 1.0f, 1.0f};
  const std::vector<float> dA = {2.0f, -0.5f, 3.0f};
  ref::mamba_a_forward(A.data(), A_log.data(), 3);
  EXPECT_EQ(A[0], -1.0f);
  EXPECT_NEAR(A[1], -16.0f, 1e-5);
  EXPECT_NEAR(A[2], -std::exp(-0.5), 1e-7);
  ref::mamba_a_backward(dA_log.data(), dA.data(), A_log.data(), 3);
  for (int h = 0; h < 3; ++h) {
    // d/dA_log of (dA * A(A_log)) by central differences, added to the initial 1.0.
    const double fd = dA[h] * (-std::exp(A_log[h] + 1e-6) + std::exp(A_log[h] - 1e-6)) / 2e-6;
    EXPECT_NEAR(dA_log[h] - 1.0, fd, 1e-5 * (1.0 + std::fabs(fd))) << "h=" << h;
  }
}

TEST(MambaDtReference, Fp32MatchesFp64) {
  const int64_t T = 50, H = 7;
  const auto raw = test::random_normal(T * H, 81, 2.0f);
  const auto bias = test::random_normal(H, 82);
  const auto g = test::random_normal(T * H, 83);
  std::vector<float> dt(T * H), draw(T * H), dbias(H, 0.0f);
  ref::mamba_dt_forward(dt.data(), raw.data(), H, bias.data(), T, H, 0.0f, kInf);
  ref::mamba_dt_backward(draw.data(), H, dbias.data(), g.data(), raw.data(), H, bias.data(), T, H, 0.0f, kInf);
  const std::vector<double> rd(raw.begin(), raw.end()), bd(bias.begin(), bias.end()), gd(g.begin(), g.end());
  std::vector<double> dtd(T * H), drawd(T * H), dbiasd(H, 0.0);
  ref::mamba_dt_forward_generic<double>(dtd.data(), rd.data(), H, bd.data(), T, H, 0.0, INFINITY);
  ref::mamba_dt_backward_generic<double>(drawd.data(), H, dbiasd.data(), gd.data(), rd.data(), H, bd.data(), T, H, 0.0,
                                         INFINITY);
  auto as_float = [](const std::vector<double>& v) { return std::vector<float>(v.begin(), v.end()); };
  EXPECT_LT(test::relative_error(dt, as_float(dtd)), 1e-6);
  EXPECT_LT(test::relative_error(draw, as_float(drawd)), 1e-6);
  EXPECT_LT(test::relative_error(dbias, as_float(dbiasd)), 1e-6);
}

}  // namespace
}  // namespace sg
