// Bridge's scheduler.max_steps (the schedule's length in steps, replacing lr_decay_iters; the weight decay's length)
// and scheduler.lr_warmup_fraction (the warmup as a fraction of the decay), as validation resolves them.
#include "config/schedule_lengths.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "config/training_samples.h"
#include "config/weight_decay.h"
#include "validation_report_text.h"

namespace sg::config {
namespace {

using test::check_recipe;
using test::describe;
using test::names_key;

bool has_note(const ValidationReport& r, const std::string& text) {
  for (const Note& n : r.notes) {
    if (n.message.find(text) != std::string::npos) return true;
  }
  return false;
}

bool refuses(const ValidationReport& r, const std::string& key) {
  for (const Violation& v : r.violations) {
    if (names_key(v, key)) return true;
  }
  return false;
}

TEST(ScheduleLengths, MaxStepsIsTheDecaysAndTheWeightDecaysLength) {
  const ValidationReport r =
      check_recipe("llama/tiny", {"train.train_iters=60", "scheduler.max_steps=80", "scheduler.lr_decay_iters=null",
                                  "scheduler.start_weight_decay=0", "scheduler.end_weight_decay=0.1",
                                  "scheduler.weight_decay_incr_style=linear"});
  ASSERT_TRUE(r.ok()) << describe(r);
  EXPECT_EQ(r.config.scheduler.lr_decay_iters.value_or(0), 80);
  EXPECT_EQ(weight_decay_incr_iters(r.config), 80);
  EXPECT_EQ(weight_decay_incr_samples(r.config), 80 * r.config.train.global_batch_size.value_or(0));
  EXPECT_FALSE(has_note(r, "replaces scheduler.lr_decay_iters")) << describe(r);
  // A decay length set otherwise gives way, as in Bridge, with a note.
  const ValidationReport replaced =
      check_recipe("llama/tiny", {"train.train_iters=60", "scheduler.max_steps=80", "scheduler.lr_decay_iters=70"});
  ASSERT_TRUE(replaced.ok()) << describe(replaced);
  EXPECT_EQ(replaced.config.scheduler.lr_decay_iters.value_or(0), 80);
  EXPECT_TRUE(has_note(replaced, "scheduler.max_steps replaces scheduler.lr_decay_iters")) << describe(replaced);
  // Without it the weight decay's length is the run's.
  EXPECT_EQ(weight_decay_incr_iters(check_recipe("llama/tiny", {"train.train_iters=60"}).config), 60);
}

TEST(ScheduleLengths, MaxStepsBelowTheRunOrWithSamplesIsRefused) {
  const ValidationReport short_schedule =
      check_recipe("llama/tiny", {"train.train_iters=60", "scheduler.max_steps=59"});
  EXPECT_TRUE(refuses(short_schedule, "scheduler.max_steps")) << describe(short_schedule);
  EXPECT_TRUE(refuses(check_recipe("llama/tiny", {"scheduler.max_steps=0"}), "scheduler.max_steps"));
  const ValidationReport samples =
      check_recipe("llama/tiny", {"train.train_iters=null", "train.train_samples=400", "scheduler.lr_warmup_iters=0",
                                  "scheduler.lr_decay_iters=null", "scheduler.max_steps=200"});
  EXPECT_TRUE(refuses(samples, "scheduler.max_steps")) << describe(samples);
}

TEST(ScheduleLengths, AWarmupFractionIsThatShareOfTheDecayToTheNearestStep) {
  const std::vector<std::string> base = {"train.train_iters=200", "scheduler.lr_decay_iters=null",
                                         "scheduler.lr_warmup_iters=0"};
  const auto with = [&](std::vector<std::string> more) {
    more.insert(more.begin(), base.begin(), base.end());
    return check_recipe("llama/tiny", more);
  };
  const ValidationReport whole = with({"scheduler.lr_warmup_fraction=0.05"});
  ASSERT_TRUE(whole.ok()) << describe(whole);
  EXPECT_EQ(resolved_lr_warmup_iters(whole.config), 10);
  EXPECT_FALSE(has_note(whole, "lr_warmup_fraction")) << describe(whole);
  // 0.033 x 200 = 6.6: 7 steps, named.
  const ValidationReport rounded = with({"scheduler.lr_warmup_fraction=0.033"});
  ASSERT_TRUE(rounded.ok()) << describe(rounded);
  EXPECT_EQ(resolved_lr_warmup_iters(rounded.config), 7);
  EXPECT_TRUE(has_note(rounded, "is 6.6 steps: the warmup takes 7")) << describe(rounded);
  // Of max_steps' decay, and of a sample-based decay in steps (800 samples of 4 = 200 steps).
  EXPECT_EQ(resolved_lr_warmup_iters(with({"scheduler.max_steps=400", "scheduler.lr_warmup_fraction=0.05"}).config),
            20);
  const ValidationReport samples =
      check_recipe("llama/tiny", {"train.train_iters=null", "train.train_samples=800", "scheduler.lr_warmup_iters=0",
                                  "scheduler.lr_decay_iters=null", "scheduler.lr_warmup_fraction=0.1"});
  ASSERT_TRUE(samples.ok()) << describe(samples);
  EXPECT_EQ(resolved_lr_warmup_iters(samples.config), 20);
  // Beside another warmup key, outside [0, 1), or as long as the decay: refused.
  EXPECT_TRUE(refuses(check_recipe("llama/tiny", {"scheduler.lr_warmup_iters=5", "scheduler.lr_warmup_fraction=0.1"}),
                      "scheduler.lr_warmup_fraction"));
  EXPECT_TRUE(refuses(with({"scheduler.lr_warmup_fraction=1.0"}), "scheduler.lr_warmup_fraction"));
  EXPECT_TRUE(refuses(with({"scheduler.lr_warmup_fraction=-0.1"}), "scheduler.lr_warmup_fraction"));
  EXPECT_TRUE(refuses(with({"scheduler.lr_warmup_fraction=0.999"}), "scheduler.lr_warmup_fraction"));
}

}  // namespace
}  // namespace sg::config
