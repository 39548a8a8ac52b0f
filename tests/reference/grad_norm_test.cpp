// CPU reference global grad norm and clip coefficient.
#include "reference/grad_norm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace {

TEST(RefGradNorm, PythagoreanTriple) {
  const std::vector<float> g = {3.0f, 0.0f, -4.0f};
  EXPECT_DOUBLE_EQ(sg::ref::grad_global_norm(g.data(), 3), 5.0);
  EXPECT_DOUBLE_EQ(sg::ref::grad_global_norm(g.data(), 0), 0.0);
}

TEST(RefGradNorm, AccumulatesInFp64) {
  // 2^24 + 1 ones would lose the +1 in an fp32 sum; fp64 keeps it.
  const int64_t n = (int64_t{1} << 24) + 1;
  const std::vector<float> g(n, 1.0f);
  EXPECT_DOUBLE_EQ(sg::ref::grad_global_norm(g.data(), n), std::sqrt(static_cast<double>(n)));
}

TEST(RefGradNorm, NonFiniteGradGivesNonFiniteNorm) {
  std::vector<float> g = {1.0f, NAN, 2.0f};
  EXPECT_FALSE(std::isfinite(sg::ref::grad_global_norm(g.data(), 3)));
  g[1] = INFINITY;
  EXPECT_FALSE(std::isfinite(sg::ref::grad_global_norm(g.data(), 3)));
}

TEST(RefClipCoefficient, Cases) {
  EXPECT_FLOAT_EQ(sg::ref::clip_coefficient(5.0, 1.0f), 1.0f / (5.0f + 1e-6f));
  EXPECT_FLOAT_EQ(sg::ref::clip_coefficient(0.5, 1.0f), 1.0f);  // under the threshold: no scaling
  EXPECT_FLOAT_EQ(sg::ref::clip_coefficient(1e9, 0.0f), 1.0f);  // clipping off
  EXPECT_FLOAT_EQ(sg::ref::clip_coefficient(1e9, -1.0f), 1.0f);
  EXPECT_FLOAT_EQ(sg::ref::clip_coefficient(NAN, 1.0f), 1.0f);       // non-finite: flag reports it
  EXPECT_FLOAT_EQ(sg::ref::clip_coefficient(INFINITY, 1.0f), 1.0f);
  EXPECT_FLOAT_EQ(sg::ref::clip_coefficient(1e300, 1.0f), 1.0f);  // overflows fp32: non-finite
}

}  // namespace
