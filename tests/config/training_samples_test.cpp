// Megatron's sample-based training: train.train_samples gives train_iters (rounded down, as Bridge), the schedule's
// lr_warmup_samples / lr_decay_samples its lengths in whole global batches; a run's config.yaml writes the derived
// step counts null, so it validates to the same again; the modes are not mixed, and a length that is not a whole
// number of global batches is refused with the nearest ones.
#include "config/training_samples.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "validation_report_text.h"

namespace sg::config {
namespace {

using test::check_recipe;
using test::describe;

// llama/tiny: a global batch of 4 sequences.
const std::vector<std::string> kSampleBased = {"train.train_iters=null", "scheduler.lr_warmup_iters=0",
                                               "train.train_samples=400", "scheduler.lr_warmup_samples=40"};

std::vector<std::string> sample_based(std::vector<std::string> more) {
  std::vector<std::string> o = kSampleBased;
  o.insert(o.end(), more.begin(), more.end());
  return o;
}

bool refused(const std::vector<std::string>& overrides, const std::string& text) {
  const ValidationReport r = check_recipe("llama/tiny", overrides);
  return !r.ok() && describe(r).find(text) != std::string::npos;
}

TEST(TrainingSamples, TheLengthsInSamplesAreStepsOfTheGlobalBatch) {
  const ValidationReport r = check_recipe("llama/tiny", kSampleBased);
  ASSERT_TRUE(r.ok()) << describe(r);
  EXPECT_EQ(r.config.train.train_iters.value_or(0), 100);
  EXPECT_EQ(r.config.scheduler.lr_decay_iters.value_or(0), 100);  // lr_decay_samples null: train_samples
  EXPECT_EQ(resolved_lr_warmup_iters(r.config), 10);
  const ValidationReport decay = check_recipe("llama/tiny", sample_based({"scheduler.lr_decay_samples=200"}));
  ASSERT_TRUE(decay.ok()) << describe(decay);
  EXPECT_EQ(decay.config.scheduler.lr_decay_iters.value_or(0), 50);
  // A run's config.yaml writes the derived steps null: it validates to the same configuration again.
  const std::string yaml = emit_yaml(r.config, "", EmitDerived::as_null);
  EXPECT_NE(yaml.find("  train_iters: null  # = 100"), std::string::npos) << yaml;
  const ValidationReport again = validate(load_config_yaml(yaml, "config.yaml"));
  ASSERT_TRUE(again.ok()) << describe(again);
  EXPECT_EQ(emit_yaml(again.config), emit_yaml(r.config));
  // Bridge rounds the steps down; the samples past them are said to be left out.
  const ValidationReport rounded =
      check_recipe("llama/tiny", sample_based({"train.train_samples=402", "scheduler.lr_decay_samples=400"}));
  ASSERT_TRUE(rounded.ok()) << describe(rounded);
  EXPECT_EQ(rounded.config.train.train_iters.value_or(0), 100);
  EXPECT_NE(describe(rounded).find("the last 2 samples are not trained"), std::string::npos) << describe(rounded);
}

TEST(TrainingSamples, TheModesAreNotMixedAndLengthsAreWholeBatches) {
  EXPECT_TRUE(refused({"train.train_samples=400"}, "train.train_iters and train.train_samples both"));
  EXPECT_TRUE(refused({"scheduler.lr_warmup_samples=40"}, "go with train.train_samples"));
  EXPECT_TRUE(refused({"scheduler.lr_decay_samples=400"}, "go with train.train_samples"));
  EXPECT_TRUE(refused(sample_based({"scheduler.lr_warmup_iters=5"}), "takes its schedule in samples"));
  EXPECT_TRUE(refused(sample_based({"scheduler.lr_decay_iters=50"}), "takes its schedule in samples"));
  EXPECT_TRUE(refused(sample_based({"scheduler.lr_warmup_samples=42"}), "use 40 or 44"));
  EXPECT_TRUE(refused(sample_based({"scheduler.lr_decay_samples=198"}), "use 196 or 200"));
  EXPECT_TRUE(refused(sample_based({"train.train_samples=402"}), "train.train_samples 402 is not a whole number"));
  EXPECT_TRUE(refused(sample_based({"train.train_samples=3"}), "less than one global batch"));
  // The warmup rule holds in samples, naming the sample keys; signs before divisibility.
  EXPECT_TRUE(refused(sample_based({"scheduler.lr_warmup_samples=400"}), "lr_warmup_samples must be less than"));
  EXPECT_TRUE(refused(sample_based({"scheduler.lr_warmup_samples=-8"}), "lr_warmup_samples must be >= 0"));
  EXPECT_TRUE(refused(sample_based({"scheduler.lr_decay_samples=0"}), "lr_decay_samples must be >= 1"));
}

// `config show` writes the derived steps as values beside the sample keys: equal to the samples' steps they say the
// same and load back; other values mix the modes.
TEST(TrainingSamples, ConfigShowsDerivedStepsLoadBack) {
  const ValidationReport r = check_recipe("llama/tiny", kSampleBased);
  ASSERT_TRUE(r.ok()) << describe(r);
  const ValidationReport again = validate(load_config_yaml(emit_yaml(r.config), "shown.yaml"));
  ASSERT_TRUE(again.ok()) << describe(again);
  EXPECT_EQ(again.config.train.train_iters.value_or(0), 100);
  EXPECT_EQ(resolved_lr_warmup_iters(again.config), 10);
  EXPECT_TRUE(refused(sample_based({"train.train_iters=99"}), "train.train_iters and train.train_samples both"));
}

}  // namespace
}  // namespace sg::config
