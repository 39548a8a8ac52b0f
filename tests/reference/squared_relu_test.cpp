// Squared ReLU reference: known values, the backward against fp64 central finite differences, fp32 vs fp64.
#include "reference/squared_relu.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "test_util.h"

namespace sg {
namespace {

TEST(SquaredReluReference, KnownValues) {
  const std::vector<float> in = {-2.0f, 0.0f, 0.5f, 3.0f}, dout = {1.0f, 1.0f, 2.0f, -1.0f};
  std::vector<float> out(4), din(4);
  ref::squared_relu_forward(out.data(), in.data(), 2, 2);
  ref::squared_relu_backward(din.data(), dout.data(), in.data(), 2, 2);
  EXPECT_EQ(out, (std::vector<float>{0.0f, 0.0f, 0.25f, 9.0f}));
  EXPECT_EQ(din, (std::vector<float>{0.0f, 0.0f, 2.0f, -6.0f}));
  // In place.
  auto x = in;
  ref::squared_relu_forward(x.data(), x.data(), 1, 4);
  EXPECT_EQ(x, out);
}

TEST(SquaredReluReference, BackwardMatchesFiniteDifferencesFp64) {
  const int64_t T = 4, F = 9;
  const auto x_f = test::random_normal(T * F, 91, 2.0f);
  const auto g_f = test::random_normal(T * F, 92);
  const std::vector<double> x(x_f.begin(), x_f.end()), g(g_f.begin(), g_f.end());
  auto loss = [&](const std::vector<double>& xx) {
    std::vector<double> out(T * F);
    ref::squared_relu_forward_generic<double>(out.data(), xx.data(), T, F);
    double l = 0.0;
    for (size_t i = 0; i < out.size(); ++i) l += g[i] * out[i];
    return l;
  };
  std::vector<double> dx(T * F, 9.0);
  ref::squared_relu_backward_generic<double>(dx.data(), g.data(), x.data(), T, F);
  for (int64_t i = 0; i < T * F; ++i) {
    ASSERT_GT(std::fabs(x[i]), 1e-4) << "test input too close to the kink";
    auto p = x, m = x;
    p[i] += 1e-6;
    m[i] -= 1e-6;
    const double fd = (loss(p) - loss(m)) / 2e-6;
    EXPECT_NEAR(dx[i], fd, 1e-7 * (1.0 + std::fabs(fd))) << "din[" << i << "] (overwritten)";
  }
}

TEST(SquaredReluReference, Fp32MatchesFp64) {
  const int64_t T = 5, F = 33;
  const auto x = test::random_normal(T * F, 93, 3.0f);
  const auto g = test::random_normal(T * F, 94);
  std::vector<float> out(T * F), dx(T * F);
  ref::squared_relu_forward(out.data(), x.data(), T, F);
  ref::squared_relu_backward(dx.data(), g.data(), x.data(), T, F);
  const std::vector<double> xd(x.begin(), x.end()), gd(g.begin(), g.end());
  std::vector<double> outd(T * F), dxd(T * F);
  ref::squared_relu_forward_generic<double>(outd.data(), xd.data(), T, F);
  ref::squared_relu_backward_generic<double>(dxd.data(), gd.data(), xd.data(), T, F);
  EXPECT_LT(test::relative_error(out, std::vector<float>(outd.begin(), outd.end())), 1e-6);
  EXPECT_LT(test::relative_error(dx, std::vector<float>(dxd.begin(), dxd.end())), 1e-6);
}

}  // namespace
}  // namespace sg
