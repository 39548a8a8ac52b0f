// The shared expert gate's CPU twin (the ground truth of the kernel tests): hand-checked values with the accumulate
// and overwrite semantics, zero tokens, and the backward against central finite differences of the forward.
#include "reference/moe_shared_gate.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "test_util.h"

namespace sg {
namespace {

TEST(MoeSharedGateReference, HandCheckedToken) {
  // logit = 1 * 0.5 + 2 * -0.25 = 0: g = 1/2. dy . s = 2 - 4 = -2: d_logit = -2 * 1/4 = -1/2.
  const std::vector<float> input = {1, 2}, weight = {0.5f, -0.25f}, shared = {2, -4}, dy = {1, 1};
  std::vector<float> out = {1, 1}, gate = {NAN};
  ref::moe_shared_gate_forward(out.data(), gate.data(), shared.data(), input.data(), weight.data(), 1, 2);
  EXPECT_EQ(gate, (std::vector<float>{0.5f}));
  EXPECT_EQ(out, (std::vector<float>{2, -1}));  // added into
  std::vector<float> d_shared = {NAN, NAN}, d_logit = {NAN}, d_input = {1, -1}, d_weight = {1, 1};
  ref::moe_shared_gate_backward(d_shared.data(), d_logit.data(), d_input.data(), d_weight.data(), dy.data(),
                                shared.data(), input.data(), weight.data(), gate.data(), 1, 2);
  EXPECT_EQ(d_shared, (std::vector<float>{0.5f, 0.5f}));
  EXPECT_EQ(d_logit, (std::vector<float>{-0.5f}));
  EXPECT_EQ(d_input, (std::vector<float>{0.75f, -0.875f}));  // 1 - 0.25, -1 + 0.125: added into
  EXPECT_EQ(d_weight, (std::vector<float>{0.5f, 0.0f}));     // 1 - 0.5 * 1, 1 - 0.5 * 2: added into
}

TEST(MoeSharedGateReference, ZeroTokensChangeNothing) {
  const std::vector<float> weight = {0.5f, -0.25f};
  std::vector<float> d_weight = {3, 4};
  ref::moe_shared_gate_forward(nullptr, nullptr, nullptr, nullptr, weight.data(), 0, 2);
  ref::moe_shared_gate_backward(nullptr, nullptr, nullptr, d_weight.data(), nullptr, nullptr, nullptr, weight.data(),
                                nullptr, 0, 2);
  EXPECT_EQ(d_weight, (std::vector<float>{3, 4}));
}

// loss = sum c * out with out0 = 0: d loss / d shared, input, weight are the backward's d_shared, d_input and d_weight
// with dy = c. Central differences in fp32 inputs (the step as the float difference actually taken), loss in double.
TEST(MoeSharedGateReference, BackwardMatchesFiniteDifferences) {
  const int64_t T = 3, H = 5;
  std::vector<float> shared = test::random_normal(T * H, 71), input = test::random_normal(T * H, 72);
  std::vector<float> weight = test::random_normal(H, 73, 0.7f);
  const std::vector<float> c = test::random_normal(T * H, 74);
  const auto loss = [&] {
    std::vector<float> out(T * H, 0.0f), gate(T);
    ref::moe_shared_gate_forward(out.data(), gate.data(), shared.data(), input.data(), weight.data(), T, H);
    double l = 0.0;
    for (int64_t i = 0; i < T * H; ++i) l += static_cast<double>(c[i]) * out[i];
    return l;
  };
  std::vector<float> out(T * H, 0.0f), gate(T), d_shared(T * H), d_logit(T), d_input(T * H, 0.0f), d_weight(H, 0.0f);
  ref::moe_shared_gate_forward(out.data(), gate.data(), shared.data(), input.data(), weight.data(), T, H);
  ref::moe_shared_gate_backward(d_shared.data(), d_logit.data(), d_input.data(), d_weight.data(), c.data(),
                                shared.data(), input.data(), weight.data(), gate.data(), T, H);
  const auto check = [&](std::vector<float>& x, const std::vector<float>& grad, const char* what) {
    for (size_t i = 0; i < x.size(); ++i) {
      const float x0 = x[i], plus = x0 + 1e-2f, minus = x0 - 1e-2f;
      x[i] = plus;
      const double l_plus = loss();
      x[i] = minus;
      const double l_minus = loss();
      x[i] = x0;
      const double fd = (l_plus - l_minus) / (static_cast<double>(plus) - minus);
      EXPECT_NEAR(grad[i], fd, 1e-3 * (1.0 + std::fabs(fd))) << what << "[" << i << "]";
    }
  };
  check(shared, d_shared, "d_shared");
  check(input, d_input, "d_input");
  check(weight, d_weight, "d_weight");
  for (int64_t i = 0; i < T * H; ++i) {  // d_input started at 0: d_logit[t] w[h], so d_logit is checked too
    EXPECT_NEAR(d_input[i], static_cast<double>(d_logit[i / H]) * weight[i % H], 1e-6 * std::fabs(d_input[i]))
        << "d_input[" << i << "]";
  }
}

}  // namespace
}  // namespace sg
