// CPU reference linear layer: forward on a hand-computed case, both backward passes against central
// finite differences of the scalar loss L = sum(R * y), and the accumulate contract of dW.
#include "reference/linear.h"

#include <gtest/gtest.h>

#include <vector>

#include "test_util.h"

namespace sg {
namespace {

TEST(ReferenceLinear, ForwardHandComputed) {
  // x [T=2, K=2], W [N=3, K=2] -> y = x W^T [2, 3]
  const std::vector<float> x = {1, 2, -1, 3};
  const std::vector<float> w = {1, 0, 0, 1, 1, 1};
  std::vector<float> y(6, -99.0f);
  ref::linear_forward(y.data(), x.data(), w.data(), 2, 2, 3);
  EXPECT_EQ(y, (std::vector<float>{1, 2, 3, -1, 3, 2}));
}

double loss(const std::vector<float>& x, const std::vector<float>& w, const std::vector<float>& r, int64_t T,
            int64_t K, int64_t N) {
  std::vector<float> y(T * N);
  ref::linear_forward(y.data(), x.data(), w.data(), T, K, N);
  double l = 0.0;
  for (size_t i = 0; i < y.size(); ++i) l += static_cast<double>(r[i]) * y[i];
  return l;
}

struct Shape {
  int64_t T, K, N;
};

class ReferenceLinearGrad : public ::testing::TestWithParam<Shape> {};

TEST_P(ReferenceLinearGrad, BackwardMatchesFiniteDifferences) {
  const auto [T, K, N] = GetParam();
  const auto x = test::random_normal(T * K, 1);
  const auto w = test::random_normal(N * K, 2);
  const auto r = test::random_normal(T * N, 3);  // dL/dy

  std::vector<float> dx(T * K, -99.0f);
  ref::linear_backward_input(dx.data(), r.data(), w.data(), T, K, N);
  std::vector<float> dw(N * K, 0.0f);
  ref::linear_backward_weight(dw.data(), r.data(), x.data(), T, K, N);

  // L is linear in x and in w, so a large step has no truncation error; only fp32 rounding remains.
  const float h = 0.25f;
  std::vector<float> fd_dx(T * K), fd_dw(N * K);
  for (int64_t i = 0; i < T * K; ++i) {
    auto xp = x, xm = x;
    xp[i] += h;
    xm[i] -= h;
    fd_dx[i] = static_cast<float>((loss(xp, w, r, T, K, N) - loss(xm, w, r, T, K, N)) / (2.0 * h));
  }
  for (int64_t i = 0; i < N * K; ++i) {
    auto wp = w, wm = w;
    wp[i] += h;
    wm[i] -= h;
    fd_dw[i] = static_cast<float>((loss(x, wp, r, T, K, N) - loss(x, wm, r, T, K, N)) / (2.0 * h));
  }
  EXPECT_LT(test::relative_error(dx, fd_dx), 1e-4);
  EXPECT_LT(test::relative_error(dw, fd_dw), 1e-4);
}

INSTANTIATE_TEST_SUITE_P(Shapes, ReferenceLinearGrad,
                         ::testing::Values(Shape{1, 3, 2}, Shape{5, 4, 7}, Shape{7, 16, 8}, Shape{3, 9, 1}));

TEST(ReferenceLinear, BackwardWeightAccumulates) {
  const int64_t T = 4, K = 5, N = 3;
  const auto x = test::random_normal(T * K, 4);
  const auto dy = test::random_normal(T * N, 5);
  std::vector<float> once(N * K, 0.0f);
  ref::linear_backward_weight(once.data(), dy.data(), x.data(), T, K, N);
  std::vector<float> twice(N * K, 0.0f);
  ref::linear_backward_weight(twice.data(), dy.data(), x.data(), T, K, N);
  ref::linear_backward_weight(twice.data(), dy.data(), x.data(), T, K, N);
  std::vector<float> expected(N * K);
  for (int64_t i = 0; i < N * K; ++i) expected[i] = 2.0f * once[i];
  EXPECT_LT(test::relative_error(twice, expected), 1e-6);
  double norm = 0.0;
  for (float v : once) norm += std::abs(v);
  EXPECT_GT(norm, 0.0);
}

}  // namespace
}  // namespace sg
