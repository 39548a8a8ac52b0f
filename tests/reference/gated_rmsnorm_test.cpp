// Gated grouped RMSNorm reference: equal to RMSNorm of y * silu(z) over each group (through
// reference/rmsnorm on the groups as rows), groups independent, the backward against fp64 central finite
// differences (strided z and dz, untouched columns, dweight added), fp32 vs fp64.
#include "reference/gated_rmsnorm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/error.h"
#include "reference/rmsnorm.h"
#include "test_util.h"

namespace sg {
namespace {

std::vector<double> to_double(const std::vector<float>& v) { return {v.begin(), v.end()}; }

TEST(GatedRmsNormReference, EqualsRmsNormOfGatedGroups) {
  const int64_t T = 3, D = 12, G = 3, gs = D / G, z_stride = 15;
  const float eps = 1e-5f;
  const auto y = test::random_normal(T * D, 1);
  const auto z = test::random_normal(T * z_stride, 2, 2.0f);
  const auto w = test::random_normal(D, 3);
  std::vector<float> out(T * D), rstd(T * G);
  ref::gated_rmsnorm_forward(out.data(), rstd.data(), y.data(), z.data(), z_stride, w.data(), T, D, G, eps);
  // [T, D] with consecutive groups is [T * G, gs]: each group is one RMSNorm row with its slice of w.
  std::vector<float> g(T * D);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t c = 0; c < D; ++c) {
      const double zc = z[t * z_stride + c];
      g[t * D + c] = static_cast<float>(y[t * D + c] * zc / (1.0 + std::exp(-zc)));
    }
  for (int64_t grp = 0; grp < G; ++grp) {
    std::vector<float> rows(T * gs), expect(T * gs), expect_rstd(T);
    for (int64_t t = 0; t < T; ++t)
      for (int64_t j = 0; j < gs; ++j) rows[t * gs + j] = g[t * D + grp * gs + j];
    ref::rmsnorm_forward(expect.data(), expect_rstd.data(), rows.data(), w.data() + grp * gs, T, gs, eps);
    for (int64_t t = 0; t < T; ++t) {
      EXPECT_NEAR(rstd[t * G + grp], expect_rstd[t], 1e-5 * expect_rstd[t]) << "t=" << t << " group " << grp;
      for (int64_t j = 0; j < gs; ++j)
        EXPECT_NEAR(out[t * D + grp * gs + j], expect[t * gs + j], 1e-5) << "t=" << t << " group " << grp;
    }
  }
}

TEST(GatedRmsNormReference, GroupsAreNormalisedSeparately) {
  const int64_t T = 2, D = 8, G = 2;
  auto y = test::random_normal(T * D, 11);
  const auto z = test::random_normal(T * D, 12);
  const std::vector<float> w(D, 1.0f);
  std::vector<float> out(T * D), out2(T * D), rstd(T * G), rstd2(T * G);
  ref::gated_rmsnorm_forward(out.data(), rstd.data(), y.data(), z.data(), D, w.data(), T, D, G, 1e-6f);
  for (int64_t c = 0; c < D / G; ++c) y[c] *= 10.0f;  // scale group 0 of token 0
  ref::gated_rmsnorm_forward(out2.data(), rstd2.data(), y.data(), z.data(), D, w.data(), T, D, G, 1e-6f);
  for (int64_t c = 0; c < D; ++c) EXPECT_NEAR(out2[c], out[c], 1e-5) << "scale-invariant per group, c=" << c;
  EXPECT_NEAR(rstd2[0], rstd[0] / 10.0f, 1e-5 * rstd[0]);
  EXPECT_EQ(rstd2[1], rstd[1]);
}

TEST(GatedRmsNormReference, BackwardMatchesFiniteDifferencesFp64) {
  const int64_t T = 3, D = 10, G = 2, z_stride = 13, dz_stride = 12;
  const double eps = 1e-5;
  const auto y = to_double(test::random_normal(T * D, 21));
  const auto z = to_double(test::random_normal(T * z_stride, 22, 2.0f));
  const auto w = to_double(test::random_normal(D, 23));
  const auto g = to_double(test::random_normal(T * D, 24));
  auto loss = [&](const std::vector<double>& yy, const std::vector<double>& zz, const std::vector<double>& ww) {
    std::vector<double> out(T * D), rstd(T * G);
    ref::gated_rmsnorm_forward_generic<double>(out.data(), rstd.data(), yy.data(), zz.data(), z_stride, ww.data(), T,
                                               D, G, eps);
    double l = 0.0;
    for (size_t i = 0; i < out.size(); ++i) l += g[i] * out[i];
    return l;
  };
  std::vector<double> out(T * D), rstd(T * G);
  ref::gated_rmsnorm_forward_generic<double>(out.data(), rstd.data(), y.data(), z.data(), z_stride, w.data(), T, D, G,
                                             eps);
  constexpr double kSentinel = 55.0;
  std::vector<double> dy(T * D, kSentinel), dz(T * dz_stride, kSentinel), dw(D, 0.75);
  ref::gated_rmsnorm_backward_generic<double>(dy.data(), dz.data(), dz_stride, dw.data(), g.data(), y.data(), z.data(),
                                              z_stride, w.data(), rstd.data(), T, D, G);
  const double step = 1e-6;
  auto fd = [&](auto perturb) {
    auto [p, m] = perturb(step);
    return (p - m) / (2 * step);
  };
  for (int64_t i = 0; i < T * D; ++i) {
    const double d = fd([&](double s) {
      auto yp = y, ym = y;
      yp[i] += s;
      ym[i] -= s;
      return std::pair{loss(yp, z, w), loss(ym, z, w)};
    });
    EXPECT_NEAR(dy[i], d, 1e-7 * (1.0 + std::fabs(d))) << "dy[" << i << "]";
  }
  for (int64_t t = 0; t < T; ++t)
    for (int64_t c = 0; c < dz_stride; ++c) {
      if (c >= D) {
        EXPECT_EQ(dz[t * dz_stride + c], kSentinel) << "column " << c << " outside the view was written";
        continue;
      }
      const double d = fd([&](double s) {
        auto zp = z, zm = z;
        zp[t * z_stride + c] += s;
        zm[t * z_stride + c] -= s;
        return std::pair{loss(y, zp, w), loss(y, zm, w)};
      });
      EXPECT_NEAR(dz[t * dz_stride + c], d, 1e-7 * (1.0 + std::fabs(d))) << "dz t=" << t << " c=" << c;
    }
  for (int64_t c = 0; c < D; ++c) {
    const double d = fd([&](double s) {
      auto wp = w, wm = w;
      wp[c] += s;
      wm[c] -= s;
      return std::pair{loss(y, z, wp), loss(y, z, wm)};
    });
    EXPECT_NEAR(dw[c] - 0.75, d, 1e-7 * (1.0 + std::fabs(d))) << "dweight[" << c << "] (added into 0.75)";
  }
}

TEST(GatedRmsNormReference, Fp32MatchesFp64) {
  const int64_t T = 6, D = 64, G = 4;
  const auto y = test::random_normal(T * D, 31);
  const auto z = test::random_normal(T * D, 32, 2.0f);
  const auto w = test::random_normal(D, 33);
  const auto g = test::random_normal(T * D, 34);
  std::vector<float> out(T * D), rstd(T * G), dy(T * D), dz(T * D), dw(D, 0.0f);
  ref::gated_rmsnorm_forward(out.data(), rstd.data(), y.data(), z.data(), D, w.data(), T, D, G, 1e-5f);
  ref::gated_rmsnorm_backward(dy.data(), dz.data(), D, dw.data(), g.data(), y.data(), z.data(), D, w.data(),
                              rstd.data(), T, D, G);
  const auto yd = to_double(y), zd = to_double(z), wd = to_double(w), gd = to_double(g);
  std::vector<double> outd(T * D), rstdd(T * G), dyd(T * D), dzd(T * D), dwd(D, 0.0);
  ref::gated_rmsnorm_forward_generic<double>(outd.data(), rstdd.data(), yd.data(), zd.data(), D, wd.data(), T, D, G,
                                             1e-5);
  ref::gated_rmsnorm_backward_generic<double>(dyd.data(), dzd.data(), D, dwd.data(), gd.data(), yd.data(), zd.data(), D,
                                              wd.data(), rstdd.data(), T, D, G);
  auto as_float = [](const std::vector<double>& v) { return std::vector<float>(v.begin(), v.end()); };
  EXPECT_LT(test::relative_error(out, as_float(outd)), 1e-6);
  EXPECT_LT(test::relative_error(rstd, as_float(rstdd)), 1e-6);
  EXPECT_LT(test::relative_error(dy, as_float(dyd)), 1e-5);
  EXPECT_LT(test::relative_error(dz, as_float(dzd)), 1e-5);
  EXPECT_LT(test::relative_error(dw, as_float(dwd)), 1e-5);
}

TEST(GatedRmsNormReference, RejectsGroupsThatDoNotDivide) {
  std::vector<float> buf(64);
  const std::string msg = test::thrown_message([&] {
    ref::gated_rmsnorm_forward(buf.data(), buf.data(), buf.data(), buf.data(), 10, buf.data(), 1, 10, 3, 1e-5f);
  });
  EXPECT_NE(msg.find("mamba_num_groups"), std::string::npos) << msg;
}

}  // namespace
}  // namespace sg
