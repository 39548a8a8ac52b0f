// Megatron's weight-decay schedule keys: set, they are the decay AdamW applies (Bridge's recipes set 0.033 beside
// optimizer.weight_decay 0.1); null takes optimizer.weight_decay; validate refuses what Megatron asserts against, and
// a decay that changes during the run is named as not implemented.
#include "config/weight_decay.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "config/validate.h"
#include "validation_report_text.h"

namespace sg::config {
namespace {

using test::check_recipe;
using test::describe;

Config with(const std::vector<std::string>& overrides) {
  return load_config("llama/tiny", overrides);
}

TEST(WeightDecaySchedule, TheSchedulesValueReplacesOptimizerWeightDecay) {
  EXPECT_DOUBLE_EQ(effective_weight_decay(with({"optimizer.weight_decay=0.1"})), 0.1);
  const Config bridge =
      with({"optimizer.weight_decay=0.1", "scheduler.start_weight_decay=0.033", "scheduler.end_weight_decay=0.033"});
  EXPECT_DOUBLE_EQ(effective_weight_decay(bridge), 0.033);
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

TEST(WeightDecaySchedule, ADecayThatChangesDuringTheRunIsNotImplemented) {
  const ValidationReport r =
      check_recipe("llama/tiny", {"scheduler.start_weight_decay=0.0", "scheduler.end_weight_decay=0.1",
                                  "scheduler.weight_decay_incr_style=cosine"});
  EXPECT_TRUE(r.ok()) << describe(r);
  const std::vector<std::string> missing = unimplemented_features(r.config);
  ASSERT_EQ(missing.size(), 1u);
  EXPECT_NE(missing[0].find("a weight decay that changes during the run"), std::string::npos) << missing[0];
}

}  // namespace
}  // namespace sg::config
