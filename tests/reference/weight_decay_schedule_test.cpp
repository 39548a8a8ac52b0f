// CPU reference weight-decay schedule (Megatron's OptimizerParamScheduler.get_wd) against values computed by hand
// from Megatron's formula: constant, linear and cosine from start to end, the end past the length, the length in
// samples (a global batch of several, and a length that is no whole number of steps).
#include "reference/weight_decay_schedule.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>

namespace {

using sg::ref::WeightDecaySchedule;
using Style = WeightDecaySchedule::Style;

// 0.1 to 0.5 over 8 steps of 4 samples (Megatron's wd_incr_steps = 32).
WeightDecaySchedule make(Style style) {
  return {.start = 0.1, .end = 0.5, .incr_samples = 32, .samples_per_step = 4, .style = style};
}

// Megatron computes in fp64; the step applies the fp32 value.
void expect_decay(const WeightDecaySchedule& s, int64_t steps_done, double megatron) {
  EXPECT_EQ(sg::ref::weight_decay_at(s, steps_done), static_cast<float>(megatron)) << "step " << steps_done;
}

TEST(RefWeightDecaySchedule, ConstantIsTheOneDecayAtEveryStep) {
  WeightDecaySchedule s = make(Style::constant);
  s.end = s.start;
  for (const int64_t step : {int64_t{0}, int64_t{1}, int64_t{8}, int64_t{9}, int64_t{1} << 40})
    expect_decay(s, step, 0.1);
  // Bitwise the decay the step applied before the schedule: optimizer.weight_decay rounded to fp32.
  s = {.start = 0.033, .end = 0.033};
  EXPECT_EQ(sg::ref::weight_decay_at(s, 12345), static_cast<float>(0.033));
}

TEST(RefWeightDecaySchedule, LinearByHand) {
  const WeightDecaySchedule s = make(Style::linear);
  expect_decay(s, 0, 0.1);   // the first update: the start
  expect_decay(s, 1, 0.15);  // 4 / 32 of the way: 0.1 + 0.125 * 0.4
  expect_decay(s, 2, 0.2);
  expect_decay(s, 4, 0.3);
  expect_decay(s, 7, 0.45);
  expect_decay(s, 8, 0.5);                 // num_steps = wd_incr_steps: ratio 1
  expect_decay(s, 9, 0.5);                 // past: the end
  expect_decay(s, int64_t{1} << 62, 0.5);  // far past (steps x batch would not fit in int64)
}

TEST(RefWeightDecaySchedule, CosineByHand) {
  const WeightDecaySchedule s = make(Style::cosine);
  expect_decay(s, 0, 0.1);  // 0.5 (cos(pi) + 1) = 0
  // ratio 1/4: 0.5 (cos(3 pi / 4) + 1) = (1 - 1/sqrt 2) / 2 = 0.1464466094067262
  expect_decay(s, 2, 0.1 + 0.1464466094067262 * 0.4);
  expect_decay(s, 4, 0.3);  // ratio 1/2: half way
  // ratio 3/4: (1 + 1/sqrt 2) / 2 = 0.8535533905932738
  expect_decay(s, 6, 0.1 + 0.8535533905932738 * 0.4);
  expect_decay(s, 8, 0.5);
  expect_decay(s, 100, 0.5);
}

// train_samples that is no whole number of global batches: Megatron's ratio is samples / train_samples.
TEST(RefWeightDecaySchedule, ALengthInSamplesThatIsNoWholeNumberOfSteps) {
  const WeightDecaySchedule s{
      .start = 0.0, .end = 0.1, .incr_samples = 10, .samples_per_step = 4, .style = Style::linear};
  expect_decay(s, 1, 0.04);  // 4 / 10
  expect_decay(s, 2, 0.08);  // 8 / 10
  expect_decay(s, 3, 0.1);   // 12 > 10: the end
}

}  // namespace
