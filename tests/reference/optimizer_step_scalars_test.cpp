// CPU reference of the optimizer's per-step scalars against hand-computed values: the partial sums' fixed
// order (pairwise within groups of 32, then the groups in order), AdamW's step constants, and the whole
// set for one step (its weight decay the schedule's at that step).
#include "reference/optimizer_step_scalars.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

namespace {

using sg::ref::AdamWConfig;
using sg::ref::LrSchedule;
using sg::ref::WeightDecaySchedule;

TEST(RefOptimizerStepScalars, PartialsAddPairwiseWithinGroupsThenGroupsInOrder) {
  // Doubles near 2^53 are 2 apart, and a tie rounds to the even one (2^53 + 4k). Group 0 (partials 0..31):
  // (2^53 + 1) -> 2^53, (1 + 1) = 2, then 2^53 + 2. Group 1 (partials 32..63) sums to 1, added after:
  // 2^53 + 3 -> 2^53 + 4. One by one, every + 1 would round back to 2^53.
  std::vector<double> p(64, 0.0);
  p[0] = 9007199254740992.0;  // 2^53
  p[1] = p[2] = p[3] = 1.0;
  p[32] = 1.0;
  EXPECT_EQ(sg::ref::sum_norm_partials(p.data(), 64), 9007199254740996.0);
  double one_by_one = 0.0;
  for (const double x : p) one_by_one += x;
  EXPECT_EQ(one_by_one, 9007199254740992.0) << "the example must depend on the order";
}

TEST(RefOptimizerStepScalars, AdamWStepConstantsByHand) {
  // lr 0.01, t = 2, beta1 0.9, beta2 0.99, weight decay 0.1 (reference/adamw's hand case).
  const sg::ref::AdamWStepConstants c = sg::ref::adamw_step_constants(0.01f, 2, AdamWConfig{0.9f, 0.99f, 1e-8f, 0.1f});
  EXPECT_NEAR(c.step_size, 0.0526315789, 1e-6 * 0.0526315789);
  EXPECT_NEAR(c.bias_correction2_sqrt, 0.1410673598, 1e-6 * 0.1410673598);
  EXPECT_EQ(c.decay_factor, 1.0f - 0.01f * 0.1f);
}

TEST(RefOptimizerStepScalars, OneStepByHand) {
  // Partials summing to 25: norm 5, clip 1 / (5 + 1e-6); linear decay from 1e-3 to 0 over steps 10..20.
  std::vector<double> p(1024, 0.0);
  p[0] = 9.0;
  p[700] = 16.0;
  const LrSchedule s{.lr = 1e-3f, .min_lr = 0.0f, .warmup_iters = 10, .decay_iters = 20,
                     .style = LrSchedule::Style::linear};
  const AdamWConfig adam{0.9f, 0.999f, 1e-8f, 0.0f};
  const WeightDecaySchedule none;
  const sg::ref::OptimizerStepScalars r =
      sg::ref::optimizer_step_scalars(p.data(), 1024, 1.0f, 3.0f, s, none, 15, adam);
  EXPECT_EQ(r.grad_norm, 5.0f);
  EXPECT_EQ(r.clip_coefficient, 1.0f / (5.0f + 1e-6f));
  EXPECT_FALSE(r.grad_nonfinite);
  EXPECT_FALSE(r.loss_nonfinite);
  EXPECT_NEAR(r.lr, 5e-4, 1e-9);
  EXPECT_EQ(r.adamw.step_size, sg::ref::adamw_step_constants(r.lr, 16, adam).step_size);
  EXPECT_EQ(r.adamw.decay_factor, 1.0f);
  // Linear from 0 to 0.2 over 20 samples of 1 a step: update 16 (15 steps done) decays by 0.15, whatever the
  // config's weight_decay.
  const WeightDecaySchedule linear{
      .start = 0.0, .end = 0.2, .incr_samples = 20, .samples_per_step = 1, .style = WeightDecaySchedule::Style::linear};
  const sg::ref::OptimizerStepScalars decayed = sg::ref::optimizer_step_scalars(
      p.data(), 1024, 1.0f, 3.0f, s, linear, 15, AdamWConfig{0.9f, 0.999f, 1e-8f, 0.7f});
  EXPECT_EQ(decayed.weight_decay, 0.15f);
  EXPECT_EQ(decayed.adamw.decay_factor, 1.0f - r.lr * 0.15f);

  p[5] = NAN;
  const sg::ref::OptimizerStepScalars bad =
      sg::ref::optimizer_step_scalars(p.data(), 1024, 1.0f, INFINITY, s, none, 15, adam);
  EXPECT_TRUE(bad.grad_nonfinite);
  EXPECT_TRUE(bad.loss_nonfinite);
  EXPECT_EQ(bad.clip_coefficient, 1.0f) << "a non-finite norm does not scale";
}

}  // namespace
