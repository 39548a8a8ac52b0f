// CPU reference AdamW against hand-computed steps.
#include "reference/adamw.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "core/bf16_bits.h"

namespace {

// lr 0.01, beta1 0.9, beta2 0.99, eps 1e-8, weight_decay 0.1, grad_scale 0.5, step t = 2:
//   bc1 = 1 - 0.9^2 = 0.19, bc2 = 1 - 0.99^2 = 0.0199, sqrt(bc2) = 0.1410673598, step = 0.01/0.19 = 0.0526315789
//   i   p     grad  m0     v0      g=0.5*grad  m=0.9m0+0.1g  v=0.99v0+0.01g^2  denom=sqrt(v)/sqrt(bc2)+eps
//   0   1.0   0.4   0.1    0.01    0.2         0.11          0.0103            0.7194358582
//   1  -0.5  -0.2   0.0    0.0    -0.1        -0.01          0.0001            0.0708881305
//   2   2.0   0.0  -0.05   0.0025  0.0        -0.045         0.002475          0.3526639567
//   update = step * m / denom = {0.0080472409, -0.0074245968, -0.0067158013}
//   decayed p = p * (1 - 0.01 * 0.1) = {0.999, -0.4995, 1.998}
//   new p = decayed p - update = {0.9909527591, -0.4920754032, 2.0047158013}
//   without weight decay:        {0.9919527591, -0.4925754032, 2.0067158013}
struct HandCase {
  std::vector<float> p = {1.0f, -0.5f, 2.0f};
  std::vector<float> grad = {0.4f, -0.2f, 0.0f};
  std::vector<float> m = {0.1f, 0.0f, -0.05f};
  std::vector<float> v = {0.01f, 0.0f, 0.0025f};
  sg::ref::AdamWConfig config{0.9f, 0.99f, 1e-8f, 0.1f};
};

void expect_rel_near(float actual, double expected, double rel) {
  EXPECT_NEAR(actual, expected, rel * std::abs(expected)) << "expected " << expected;
}

TEST(RefAdamW, HandComputedStepWithWeightDecay) {
  HandCase c;
  sg::ref::adamw_step(c.p.data(), c.grad.data(), c.m.data(), c.v.data(), 3, 0.01f, 0.5f, 2, c.config, true);
  expect_rel_near(c.p[0], 0.9909527591, 1e-6);
  expect_rel_near(c.p[1], -0.4920754032, 1e-6);
  expect_rel_near(c.p[2], 2.0047158013, 1e-6);
  expect_rel_near(c.m[0], 0.11, 1e-6);
  expect_rel_near(c.m[1], -0.01, 1e-6);
  expect_rel_near(c.m[2], -0.045, 1e-6);
  expect_rel_near(c.v[0], 0.0103, 1e-6);
  expect_rel_near(c.v[1], 0.0001, 1e-6);
  expect_rel_near(c.v[2], 0.002475, 1e-6);
}

TEST(RefAdamW, HandComputedStepWithoutWeightDecay) {
  HandCase c;
  sg::ref::adamw_step(c.p.data(), c.grad.data(), c.m.data(), c.v.data(), 3, 0.01f, 0.5f, 2, c.config, false);
  expect_rel_near(c.p[0], 0.9919527591, 1e-6);
  expect_rel_near(c.p[1], -0.4925754032, 1e-6);
  expect_rel_near(c.p[2], 2.0067158013, 1e-6);
}

// First step from zero moments: m_hat = g, v_hat = g^2, so the update is lr * g / (|g| + eps) ~ lr * sign(g).
TEST(RefAdamW, FirstStepMovesBySignTimesLr) {
  std::vector<float> p = {0.3f, -0.7f}, grad = {2.0f, -0.001f}, m = {0.0f, 0.0f}, v = {0.0f, 0.0f};
  sg::ref::adamw_step(p.data(), grad.data(), m.data(), v.data(), 2, 0.1f, 1.0f, 1, {0.9f, 0.999f, 1e-8f, 0.0f},
                      true);
  EXPECT_NEAR(p[0], 0.3 - 0.1, 1e-6);
  EXPECT_NEAR(p[1], -0.7 + 0.1, 1e-5);  // |g| = 1e-3 vs eps 1e-8: relative 1e-5 off sign
}

// bf16 moments (the precision-aware optimizer): the weight update is the fp32 one, bit for bit, and each
// stored moment is the fp32 moment rounded to nearest even; a moment left fp32 is untouched.
TEST(RefAdamW, Bf16MomentsRoundOnlyTheStoredMoments) {
  for (const auto& [avg_bf16, avg_sq_bf16] : {std::pair{true, true}, std::pair{true, false}, std::pair{false, true}}) {
    HandCase fp32, mixed;
    mixed.config.exp_avg_bf16 = avg_bf16;
    mixed.config.exp_avg_sq_bf16 = avg_sq_bf16;
    sg::ref::adamw_step(fp32.p.data(), fp32.grad.data(), fp32.m.data(), fp32.v.data(), 3, 0.01f, 0.5f, 2, fp32.config,
                        true);
    sg::ref::adamw_step(mixed.p.data(), mixed.grad.data(), mixed.m.data(), mixed.v.data(), 3, 0.01f, 0.5f, 2,
                        mixed.config, true);
    EXPECT_EQ(std::memcmp(fp32.p.data(), mixed.p.data(), 3 * sizeof(float)), 0) << "the update must use fp32 moments";
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(mixed.m[i], avg_bf16 ? sg::round_to_bf16(fp32.m[i]) : fp32.m[i]) << i;
      EXPECT_EQ(mixed.v[i], avg_sq_bf16 ? sg::round_to_bf16(fp32.v[i]) : fp32.v[i]) << i;
    }
    // 0.11, 0.0103 and 0.002475 are not bf16 values: the rounding is visible.
    if (avg_bf16) {
      EXPECT_NE(mixed.m[0], fp32.m[0]);
    }
    if (avg_sq_bf16) {
      EXPECT_NE(mixed.v[0], fp32.v[0]);
    }
  }
}

TEST(RefAdamW, RoundToBf16IsNearestEven) {
  EXPECT_EQ(sg::round_to_bf16(1.0f), 1.0f);
  // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties go to the even mantissa, 1.
  EXPECT_EQ(sg::round_to_bf16(1.0f + 1.0f / 256), 1.0f);
  EXPECT_EQ(sg::round_to_bf16(1.0f + 3.0f / 256), 1.0f + 4.0f / 256);  // tie, to even (2 x 2^-7)
  EXPECT_EQ(sg::round_to_bf16(1.0f + 1.5f / 256), 1.0f + 1.0f / 128);  // above the tie: up
  EXPECT_EQ(sg::round_to_bf16(-0.11f), -sg::round_to_bf16(0.11f));
}

}  // namespace
