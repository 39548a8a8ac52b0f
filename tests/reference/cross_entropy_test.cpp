// CPU reference cross-entropy: dlogits against central finite differences of the loss, hand-computed
// values, masking and the out-of-range target error.
#include "reference/cross_entropy.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/error.h"
#include "test_util.h"

namespace {

using sg::ref::cross_entropy_forward_backward;

TEST(RefCrossEntropy, HandComputedTwoClassRow) {
  // logits {0, ln 3}: softmax {1/4, 3/4}; target 0 -> loss = ln 4; dlogits = scale * {1/4 - 1, 3/4}.
  const std::vector<float> logits = {0.0f, std::log(3.0f)};
  const std::vector<int32_t> targets = {0};
  const std::vector<float> mask = {1.0f};
  std::vector<float> dlogits(2, NAN);
  const double loss = cross_entropy_forward_backward(dlogits.data(), logits.data(), targets.data(), mask.data(),
                                                     1, 2, 0.5f);
  EXPECT_NEAR(loss, std::log(4.0), 1e-6);
  EXPECT_NEAR(dlogits[0], 0.5 * (0.25 - 1.0), 1e-6);
  EXPECT_NEAR(dlogits[1], 0.5 * 0.75, 1e-6);
}

TEST(RefCrossEntropy, UniformLogitsGiveLogV) {
  const int64_t T = 3, V = 11;
  const std::vector<float> logits(T * V, 1.5f);
  const std::vector<int32_t> targets = {0, 5, 10};
  const std::vector<float> mask = {1.0f, 1.0f, 1.0f};
  const double loss = cross_entropy_forward_backward(nullptr, logits.data(), targets.data(), mask.data(), T, V, 1.0f);
  EXPECT_NEAR(loss, 3.0 * std::log(11.0), 1e-5);
}

// dlogits must equal d(scale * sum_t mask_t loss_t) / dlogits, checked by central differences.
TEST(RefCrossEntropy, DlogitsMatchFiniteDifferences) {
  const int64_t T = 5, V = 7;
  std::vector<float> logits = sg::test::random_normal(T * V, 11, 2.0f);
  const std::vector<int32_t> targets = sg::test::random_tokens(T, V, 12);
  const std::vector<float> mask = {1.0f, 0.0f, 1.0f, 1.0f, 0.0f};
  const double count = sg::ref::loss_token_count(mask.data(), T);
  ASSERT_EQ(count, 3.0);
  const float scale = static_cast<float>(1.0 / (2.0 * count));  // 2 microbatches, mean over 3 tokens
  std::vector<float> dlogits(T * V, NAN);
  cross_entropy_forward_backward(dlogits.data(), logits.data(), targets.data(), mask.data(), T, V, scale);

  double max_abs_err = 0.0, max_abs_grad = 0.0;
  for (int64_t i = 0; i < T * V; ++i) {
    const float x = logits[i];
    const float xp = x + 1e-2f, xm = x - 1e-2f;
    logits[i] = xp;
    const double lp = cross_entropy_forward_backward(nullptr, logits.data(), targets.data(), mask.data(), T, V, scale);
    logits[i] = xm;
    const double lm = cross_entropy_forward_backward(nullptr, logits.data(), targets.data(), mask.data(), T, V, scale);
    logits[i] = x;
    // The exact step actually taken (xp - xm in fp32), so only the O(h^2) truncation error remains.
    const double numeric = scale * (lp - lm) / (static_cast<double>(xp) - xm);
    max_abs_err = std::max(max_abs_err, std::abs(numeric - dlogits[i]));
    max_abs_grad = std::max(max_abs_grad, std::abs(static_cast<double>(dlogits[i])));
  }
  EXPECT_GT(max_abs_grad, 1e-3);  // the check is not vacuous
  EXPECT_LT(max_abs_err, 1e-4 * max_abs_grad) << "max |numeric - analytic| = " << max_abs_err;
  // Masked rows have zero gradient.
  for (int64_t v = 0; v < V; ++v) {
    EXPECT_EQ(dlogits[1 * V + v], 0.0f);
    EXPECT_EQ(dlogits[4 * V + v], 0.0f);
  }
  // Each active row's gradient sums to zero (softmax minus onehot).
  for (int64_t t : {0, 2, 3}) {
    double s = 0.0;
    for (int64_t v = 0; v < V; ++v) s += dlogits[t * V + v];
    EXPECT_NEAR(s, 0.0, 1e-6);
  }
}

TEST(RefCrossEntropy, MaskWeightsTheLossAndSkipsMaskedTargets) {
  const int64_t T = 2, V = 4;
  const std::vector<float> logits = sg::test::random_normal(T * V, 21);
  const std::vector<float> mask_one = {1.0f, 0.0f};
  const std::vector<int32_t> targets_bad_masked = {2, 99};  // row 1 is masked out: its target is not read
  const std::vector<int32_t> targets_row0 = {2, 0};
  const double l_masked = cross_entropy_forward_backward(nullptr, logits.data(), targets_bad_masked.data(),
                                                         mask_one.data(), T, V, 1.0f);
  const std::vector<float> mask_row0_only = {1.0f, 0.0f};
  const double l_row0 = cross_entropy_forward_backward(nullptr, logits.data(), targets_row0.data(),
                                                       mask_row0_only.data(), 1, V, 1.0f);
  EXPECT_DOUBLE_EQ(l_masked, l_row0);
  const std::vector<int32_t> targets_bad = {2, -1};
  const std::vector<float> mask_all = {1.0f, 1.0f};
  EXPECT_THROW(cross_entropy_forward_backward(nullptr, logits.data(), targets_bad.data(), mask_all.data(), T, V, 1.0f),
               sg::Error);
}

}  // namespace
