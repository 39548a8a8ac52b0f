// Megatron's weight-decay schedule in the training step (model/weight_decay_schedule.h): the schedule counts the
// global batch as each step's samples, and the CPU step decays every update by the schedule's value at the steps
// done before it, bit for bit a step with a constant decay of the value computed by hand from Megatron's formula
// (linear and cosine, during and past the end); a resume mid-schedule trains as the uninterrupted run.
#include "model/weight_decay_schedule.h"

#include <gtest/gtest.h>

#include <vector>

#include "kernels/weight_decay_schedule.h"
#include "model/cpu_model.h"
#include "reference/weight_decay_schedule.h"
#include "tiny_model.h"

namespace sg::model {
namespace {

// 0.1 to 0.5 over 8 samples, two sequences a step: 4 steps.
OptimizerSpec scheduled(WeightDecayIncrStyle style) {
  OptimizerSpec o;
  o.lr = 1e-2;
  o.weight_decay = 0.1;
  o.end_weight_decay = 0.5;
  o.weight_decay_incr_samples = 8;
  o.weight_decay_incr_style = style;
  return o;
}

BatchSpec two_sequences() {
  BatchSpec b;
  b.micro_batch_size = 2;
  return b;
}

TEST(WeightDecaySchedule, TheStepCountsTheGlobalBatch) {
  BatchSpec b;
  b.micro_batch_size = 2;
  b.num_microbatches = 3;
  b.data_parallel_size = 4;
  const OptimizerSpec o = scheduled(WeightDecayIncrStyle::cosine);
  const auto k = weight_decay_schedule<kernels::WeightDecayScheduleConfig>(o, b);
  EXPECT_EQ(k.samples_per_step, 24);
  EXPECT_EQ(k.incr_samples, 8);
  EXPECT_EQ(k.start, 0.1);
  EXPECT_EQ(k.end, 0.5);
  EXPECT_EQ(k.style, kernels::WeightDecayScheduleConfig::Style::cosine);
  const auto r = weight_decay_schedule<ref::WeightDecaySchedule>(scheduled(WeightDecayIncrStyle::linear), b);
  EXPECT_EQ(r.samples_per_step, 24);
  EXPECT_EQ(r.style, ref::WeightDecaySchedule::Style::linear);
  EXPECT_EQ(weight_decay_schedule<ref::WeightDecaySchedule>(OptimizerSpec{}, b).style,
            ref::WeightDecaySchedule::Style::constant);
}

// Each step from the scheduled model's state, by a model of the hand-computed constant decay: the same weights.
void expect_decays(WeightDecayIncrStyle style, const std::vector<double>& megatron) {
  const ModelSpec spec = test::tiny_model_spec();
  const BatchSpec batch_spec = two_sequences();
  CpuModel model(spec, batch_spec, scheduled(style), rng::RngState{3, 0});
  CpuModel unscheduled(spec, batch_spec, scheduled(WeightDecayIncrStyle::constant), rng::RngState{3, 0});
  for (size_t step = 0; step < megatron.size(); ++step) {
    OptimizerSpec constant = scheduled(WeightDecayIncrStyle::constant);
    constant.weight_decay = megatron[step];
    CpuModel by_hand(spec, batch_spec, constant, rng::RngState{3, 0});
    by_hand.load_state(model.weights(), model.exp_avg(), model.exp_avg_sq(), model.steps_done(), model.rng_state());
    const HostBatch batch = test::random_batch(spec, batch_spec, 60 + step);
    model.train_step(batch);
    by_hand.train_step(batch);
    unscheduled.train_step(batch);
    EXPECT_EQ(model.weights(), by_hand.weights()) << "step " << step + 1 << ": decay " << megatron[step];
  }
  EXPECT_NE(model.weights(), unscheduled.weights()) << "the schedule must change the run";
}

TEST(WeightDecaySchedule, TheCpuStepDecaysByMegatronsLinearValue) {
  // ratio = steps done x 2 / 8: 0, 1/4, 1/2, 3/4, 1, then past the end.
  expect_decays(WeightDecayIncrStyle::linear, {0.1, 0.2, 0.3, 0.4, 0.5, 0.5});
}

TEST(WeightDecaySchedule, TheCpuStepDecaysByMegatronsCosineValue) {
  // 0.5 (cos(pi (1 - ratio)) + 1): 0, (1 - 1/sqrt 2) / 2, 1/2, (1 + 1/sqrt 2) / 2, 1.
  expect_decays(WeightDecayIncrStyle::cosine,
                {0.1, 0.1 + 0.4 * 0.1464466094067262, 0.3, 0.1 + 0.4 * 0.8535533905932738, 0.5, 0.5});
}

TEST(WeightDecaySchedule, AResumeMidScheduleTrainsAsTheUninterruptedRun) {
  ModelSpec spec = test::tiny_model_spec();
  spec.hidden_dropout = 0.1f;
  const BatchSpec batch_spec = two_sequences();
  const OptimizerSpec o = scheduled(WeightDecayIncrStyle::linear);
  CpuModel whole(spec, batch_spec, o, rng::RngState{8, 0});
  for (uint64_t i = 0; i < 2; ++i) whole.train_step(test::random_batch(spec, batch_spec, 40 + i));
  CpuModel resumed(spec, batch_spec, o, rng::RngState{8, 0});
  resumed.load_state(whole.weights(), whole.exp_avg(), whole.exp_avg_sq(), whole.steps_done(), whole.rng_state());
  for (uint64_t i = 2; i < 6; ++i) {
    const HostBatch next = test::random_batch(spec, batch_spec, 40 + i);
    EXPECT_EQ(whole.train_step(next).loss, resumed.train_step(next).loss) << "step " << i + 1;
  }
  EXPECT_EQ(whole.weights(), resumed.weights());
  EXPECT_EQ(whole.exp_avg_sq(), resumed.exp_avg_sq());
}

}  // namespace
}  // namespace sg::model
