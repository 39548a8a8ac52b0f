#pragma once
// Gradient checks for the CPU twins: an analytic gradient against fp64 central finite differences.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

namespace sg::test {

// For every coordinate i of x: grad[i] ~ (f(x + h e_i) - f(x - h e_i)) / 2h within tol (1 + |fd|).
inline void expect_matches_finite_differences(const std::function<double(const std::vector<double>&)>& f,
                                              const std::vector<double>& x, const std::vector<double>& grad,
                                              const std::string& what, double step = 1e-6, double tol = 1e-7) {
  ASSERT_EQ(x.size(), grad.size()) << what;
  for (size_t i = 0; i < x.size(); ++i) {
    auto plus = x, minus = x;
    plus[i] += step;
    minus[i] -= step;
    const double fd = (f(plus) - f(minus)) / (2 * step);
    EXPECT_NEAR(grad[i], fd, tol * (1.0 + std::fabs(fd))) << what << "[" << i << "]";
  }
}

}  // namespace sg::test
