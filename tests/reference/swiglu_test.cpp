// SwiGLU reference: a hand-computed value, backward against fp64 central finite differences.
#include "reference/swiglu.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "test_util.h"

namespace sg {
namespace {

TEST(SwiGluReference, ForwardKnownValues) {
  // T=1, F=2: gate = [1, -2], up = [2, 3]; silu(g) = g / (1 + e^-g).
  const std::vector<float> gate_up = {1.0f, -2.0f, 2.0f, 3.0f};
  std::vector<float> out(2);
  ref::swiglu_forward(out.data(), gate_up.data(), 1, 2);
  EXPECT_NEAR(out[0], 1.0 / (1.0 + std::exp(-1.0)) * 2.0, 1e-6);
  EXPECT_NEAR(out[1], -2.0 / (1.0 + std::exp(2.0)) * 3.0, 1e-6);
}

TEST(SwiGluReference, BackwardMatchesFiniteDifferencesFp64) {
  const int64_t T = 3, F = 5;
  const auto gu_f = test::random_normal(T * 2 * F, 41, 2.0f);
  const auto g_f = test::random_normal(T * F, 42);
  const std::vector<double> gate_up(gu_f.begin(), gu_f.end()), g(g_f.begin(), g_f.end());
  auto loss = [&](const std::vector<double>& gu) {
    std::vector<double> out(T * F);
    ref::swiglu_forward_generic<double>(out.data(), gu.data(), T, F);
    double l = 0.0;
    for (size_t i = 0; i < out.size(); ++i) l += g[i] * out[i];
    return l;
  };
  std::vector<double> dgu(T * 2 * F, 123.0);
  ref::swiglu_backward_generic<double>(dgu.data(), g.data(), gate_up.data(), T, F);
  const double step = 1e-6;
  for (int64_t i = 0; i < T * 2 * F; ++i) {
    auto p = gate_up, m = gate_up;
    p[i] += step;
    m[i] -= step;
    const double fd = (loss(p) - loss(m)) / (2 * step);
    EXPECT_NEAR(dgu[i], fd, 1e-7 * (1.0 + std::fabs(fd))) << "dgate_up[" << i << "]";
  }
}

TEST(SwiGluReference, Fp32MatchesFp64) {
  const int64_t T = 4, F = 33;
  const auto gu = test::random_normal(T * 2 * F, 51, 3.0f);
  const auto g = test::random_normal(T * F, 52);
  std::vector<float> out(T * F), dgu(T * 2 * F);
  ref::swiglu_forward(out.data(), gu.data(), T, F);
  ref::swiglu_backward(dgu.data(), g.data(), gu.data(), T, F);
  const std::vector<double> gud(gu.begin(), gu.end()), gd(g.begin(), g.end());
  std::vector<double> outd(T * F), dgud(T * 2 * F);
  ref::swiglu_forward_generic<double>(outd.data(), gud.data(), T, F);
  ref::swiglu_backward_generic<double>(dgud.data(), gd.data(), gud.data(), T, F);
  EXPECT_LT(test::relative_error(out, std::vector<float>(outd.begin(), outd.end())), 1e-6);
  EXPECT_LT(test::relative_error(dgu, std::vector<float>(dgud.begin(), dgud.end())), 1e-6);
}

}  // namespace
}  // namespace sg
