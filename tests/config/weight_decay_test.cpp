// Megatron's weight-decay schedule keys: set, they are the decay AdamW applies (Bridge's recipes set 0.033 beside
// optimizer.weight_decay 0.1); null takes optimizer.weight_decay; validate refuses what Megatron asserts against, and
// accepts a decay that changes during the run (linear, cosine).
#include "config/weight_decay.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "config/validate.h"
#include "core/error.h"
#include "core/strings.h"
#include "validation_report_text.h"

namespace sg::config {
namespace {

using test::check_recipe;
using test::describe;

Config with(const std::vector<std::string>& overrides) {
  return load_config("llama/tiny", overrides);
}

TEST(WeightDecaySchedule, TheSchedulesValueReplacesOptimizerWeightDecay) {
  EXPECT_DOUBLE_EQ(start_weight_decay(with({"optimizer.weight_decay=0.1"})), 0.1);
  EXPECT_DOUBLE_EQ(end_weight_decay(with({"optimizer.weight_decay=0.1"})), 0.1);
  const Config bridge =
      with({"optimizer.weight_decay=0.1", "scheduler.start_weight_decay=0.033", "scheduler.end_weight_decay=0.033"});
  EXPECT_DOUBLE_EQ(start_weight_decay(bridge), 0.033);
  EXPECT_DOUBLE_EQ(end_weight_decay(bridge), 0.033);
  EXPECT_FALSE(weight_decay_changes(bridge));
  const ValidationReport r = validate(bridge);
  EXPECT_TRUE(r.ok()) << describe(r);
  EXPECT_TRUE(unimplemented_features(r.config).empty());
  // Equal start and end are one decay whatever the style.
  for (const char* style : {"linear", "cosine"}) {
    const ValidationReport same =
        check_recipe("llama/tiny", {"scheduler.start_weight_decay=0.05", "scheduler.end_weight_decay=0.05",
                                    std::string("scheduler.weight_decay_incr_style=") + style});
    EXPECT_TRUE(same.ok() && unimplemented_features(same.config).empty()) << style << describe(same);
  }
}

// A null end is optimizer.weight_decay, so a start alone below it makes a schedule (linear or cosine) that rises to it.
TEST(WeightDecaySchedule, ANullEndIsOptimizerWeightDecay) {
  const Config c = with(
      {"optimizer.weight_decay=0.1", "scheduler.start_weight_decay=0.0", "scheduler.weight_decay_incr_style=linear"});
  EXPECT_DOUBLE_EQ(start_weight_decay(c), 0.0);
  EXPECT_DOUBLE_EQ(end_weight_decay(c), 0.1);
  EXPECT_TRUE(weight_decay_changes(c));
  EXPECT_EQ(weight_decay_incr_style(c), model::WeightDecayIncrStyle::linear);
}

// Bridge's wd_incr_steps: train_iters x global_batch_size, or train_samples with sample-based training.
TEST(WeightDecaySchedule, TheLengthIsTheRunsInSamples) {
  const Config iters =
      validate(with({"train.train_iters=50", "train.global_batch_size=8", "train.micro_batch_size=2"})).config;
  EXPECT_EQ(weight_decay_incr_iters(iters), 50);
  EXPECT_EQ(weight_decay_incr_samples(iters), 400);
  const ValidationReport samples = validate(with(
      {"train.train_iters=null", "train.train_samples=403", "train.global_batch_size=8", "train.micro_batch_size=2",
       "scheduler.lr_warmup_iters=0", "scheduler.lr_decay_iters=null", "scheduler.lr_decay_samples=400"}));
  ASSERT_TRUE(samples.ok()) << describe(samples);
  EXPECT_EQ(weight_decay_incr_iters(samples.config), 50);
  EXPECT_EQ(weight_decay_incr_samples(samples.config), 403) << "Megatron's ratio counts train_samples, not the steps";
}

TEST(WeightDecaySchedule, TheStyleNamesAreMegatrons) {
  EXPECT_EQ(weight_decay_incr_styles(), (std::vector<std::string>{"constant", "linear", "cosine"}));
  EXPECT_EQ(weight_decay_incr_style(with({})), model::WeightDecayIncrStyle::constant);
  EXPECT_EQ(weight_decay_incr_style(with({"scheduler.weight_decay_incr_style=cosine"})),
            model::WeightDecayIncrStyle::cosine);
  Config c = with({});
  c.scheduler.weight_decay_incr_style = "exponential";  // validation refuses it first
  EXPECT_THROW(weight_decay_incr_style(c), Error);
}

TEST(WeightDecaySchedule, ValidateRefusesWhatMegatronAssertsAgainst) {
  const auto refused = [](const std::vector<std::string>& overrides, const std::string& text) {
    const ValidationReport r = check_recipe("llama/tiny", overrides);
    return !r.ok() && describe(r).find(text) != std::string::npos;
  };
  EXPECT_TRUE(refused({"scheduler.start_weight_decay=-0.1"}, "scheduler.start_weight_decay"));
  EXPECT_TRUE(refused({"scheduler.start_weight_decay=0.1", "scheduler.end_weight_decay=0.01",
                       "scheduler.weight_decay_incr_style=linear"},
                      "the weight decay schedule decreases"));
  // Constant with two values (a null one is optimizer.weight_decay).
  EXPECT_TRUE(refused({"optimizer.weight_decay=0.1", "scheduler.start_weight_decay=0.01"},
                      "weight_decay_incr_style constant needs end_weight_decay = start_weight_decay"));
  EXPECT_TRUE(refused({"scheduler.weight_decay_incr_style=exponential"}, "scheduler.weight_decay_incr_style"));
}

TEST(WeightDecaySchedule, ADecayThatChangesDuringTheRunIsAccepted) {
  for (const char* style : {"linear", "cosine"}) {
    const ValidationReport r =
        check_recipe("llama/tiny", {"scheduler.start_weight_decay=0.0", "scheduler.end_weight_decay=0.1",
                                    std::string("scheduler.weight_decay_incr_style=") + style});
    EXPECT_TRUE(r.ok()) << style << describe(r);
    EXPECT_TRUE(unimplemented_features(r.config).empty())
        << style << ": " << join(unimplemented_features(r.config), "; ");
  }
}

}  // namespace
}  // namespace sg::config
