// The lr schedule's keys (config/lr_decay.h): the style tables validation accepts and the backend trains with are
// one list each; WSD needs its annealing length, within the decay; lr_warmup_init within [0, lr]; the keys that shape
// nothing under the chosen style are noted; sample-based WSD lengths become steps.
#include "config/lr_decay.h"

#include <gtest/gtest.h>

#include "config/validate.h"
#include "core/error.h"
#include "test_util.h"
#include "validation_report_text.h"

namespace sg::config {
namespace {

bool has_violation(const ValidationReport& report, const std::string& key) {
  for (const Violation& v : report.violations) {
    for (const KeyValue& kv : v.values) {
      if (kv.key == key) return true;
    }
  }
  return false;
}

bool has_note(const ValidationReport& report, const std::string& text) {
  for (const Note& n : report.notes) {
    if (n.message.find(text) != std::string::npos) return true;
  }
  return false;
}

ValidationReport check(const std::vector<std::string>& overrides) {
  return validate(load_config("tiny", overrides));
}

TEST(LrDecay, EveryMegatronStyleValidatesAndTrains) {
  EXPECT_EQ(lr_decay_style_names(),
            (std::vector<std::string>{"constant", "linear", "cosine", "inverse-square-root", "WSD"}));
  EXPECT_EQ(lr_wsd_decay_style_names(), (std::vector<std::string>{"exponential", "linear", "cosine", "minus_sqrt"}));
  for (const LrDecayStyleName& s : lr_decay_styles()) {
    std::vector<std::string> overrides = {std::string("scheduler.lr_decay_style=") + s.name};
    if (s.style == model::LrDecayStyle::wsd) overrides.push_back("scheduler.lr_wsd_decay_iters=5");
    const ValidationReport report = check(overrides);
    EXPECT_TRUE(report.ok()) << s.name << "\n" << test::describe(report);
    EXPECT_TRUE(unimplemented_features(report.config).empty()) << s.name;
    EXPECT_EQ(lr_decay_style(s.name), s.style);
  }
  for (const LrWsdDecayStyleName& s : lr_wsd_decay_styles()) EXPECT_EQ(lr_wsd_decay_style(s.name), s.style);
  EXPECT_TRUE(has_violation(check({"scheduler.lr_decay_style=exponential"}), "scheduler.lr_decay_style"));
  EXPECT_TRUE(has_violation(check({"scheduler.lr_wsd_decay_style=sqrt"}), "scheduler.lr_wsd_decay_style"));
  EXPECT_EQ(test::thrown_message([] { lr_decay_style("exponential"); }),
            "scheduler.lr_decay_style = exponential is not a style stepgraph knows; use one of: constant, linear, "
            "cosine, inverse-square-root, WSD");
  EXPECT_EQ(test::thrown_message([] { lr_wsd_decay_style("sqrt"); }),
            "scheduler.lr_wsd_decay_style = sqrt is not a style stepgraph knows; use one of: exponential, linear, "
            "cosine, minus_sqrt");
}

TEST(LrDecay, WsdNeedsAnAnnealingPhaseWithinTheDecay) {
  const ValidationReport missing = check({"scheduler.lr_decay_style=WSD"});
  EXPECT_TRUE(has_violation(missing, "scheduler.lr_wsd_decay_iters")) << test::describe(missing);
  for (const char* bad : {"scheduler.lr_wsd_decay_iters=0", "scheduler.lr_wsd_decay_iters=-3"}) {
    EXPECT_TRUE(has_violation(check({"scheduler.lr_decay_style=WSD", bad}), "scheduler.lr_wsd_decay_iters")) << bad;
  }
  const ValidationReport too_long =
      check({"scheduler.lr_decay_style=WSD", "scheduler.lr_decay_iters=20", "scheduler.lr_wsd_decay_iters=21"});
  EXPECT_TRUE(has_violation(too_long, "scheduler.lr_decay_iters")) << test::describe(too_long);
  // Longer than the decay after the warmup: valid, as in Megatron, with a note that the lr drops at the warmup's end.
  const ValidationReport overlap = check({"scheduler.lr_decay_style=WSD", "scheduler.lr_warmup_iters=5",
                                          "scheduler.lr_decay_iters=20", "scheduler.lr_wsd_decay_iters=18"});
  EXPECT_TRUE(overlap.ok()) << test::describe(overlap);
  EXPECT_TRUE(has_note(overlap, "inside the warmup")) << test::describe(overlap);
  const ValidationReport fits = check({"scheduler.lr_decay_style=WSD", "scheduler.lr_warmup_iters=5",
                                       "scheduler.lr_decay_iters=20", "scheduler.lr_wsd_decay_iters=15"});
  EXPECT_TRUE(fits.ok() && !has_note(fits, "inside the warmup")) << test::describe(fits);
  // Under another style the WSD keys shape nothing: a note, not an error (Bridge's recipes set the style anyway).
  EXPECT_TRUE(has_note(check({"scheduler.lr_decay_style=cosine", "scheduler.lr_wsd_decay_style=linear"}),
                       "unused with cosine"));
  EXPECT_FALSE(has_note(check({"scheduler.lr_decay_style=cosine"}), "lr_wsd_decay"));
}

TEST(LrDecay, WarmupInitIsWithinZeroAndThePeak) {
  EXPECT_TRUE(check({"scheduler.lr_warmup_iters=5", "scheduler.lr_warmup_init=1e-5"}).ok());
  for (const char* bad : {"scheduler.lr_warmup_init=-1e-5", "scheduler.lr_warmup_init=1.0"}) {
    EXPECT_TRUE(has_violation(check({"scheduler.lr_warmup_iters=5", bad}), "scheduler.lr_warmup_init")) << bad;
  }
  const ValidationReport no_warmup = check({"scheduler.lr_warmup_iters=0", "scheduler.lr_warmup_init=1e-5"});
  EXPECT_TRUE(no_warmup.ok() && has_note(no_warmup, "no effect without a warmup")) << test::describe(no_warmup);
}

TEST(LrDecay, SampleBasedWsdLengthsBecomeSteps) {
  const std::vector<std::string> samples = {"train.train_iters=null",        "train.global_batch_size=4",
                                            "train.micro_batch_size=4",      "train.train_samples=400",
                                            "scheduler.lr_decay_iters=null", "scheduler.lr_warmup_iters=0",
                                            "scheduler.lr_decay_style=WSD"};
  std::vector<std::string> given = samples;
  given.push_back("scheduler.lr_wsd_decay_samples=80");
  const ValidationReport r = check(given);
  ASSERT_TRUE(r.ok()) << test::describe(r);
  EXPECT_EQ(r.config.scheduler.lr_wsd_decay_iters, 20);
  EXPECT_EQ(r.config.scheduler.lr_decay_iters, 100);
  // Its derived steps say the same; other steps mix the two modes, as does a sample length without train_samples.
  std::vector<std::string> same = given, mixed = given;
  same.push_back("scheduler.lr_wsd_decay_iters=20");
  mixed.push_back("scheduler.lr_wsd_decay_iters=10");
  EXPECT_TRUE(check(same).ok());
  EXPECT_TRUE(has_violation(check(mixed), "scheduler.lr_wsd_decay_iters"));
  std::vector<std::string> uneven = samples;
  uneven.push_back("scheduler.lr_wsd_decay_samples=81");
  EXPECT_TRUE(has_violation(check(uneven), "scheduler.lr_wsd_decay_samples"));
  std::vector<std::string> no_length = samples;
  EXPECT_TRUE(has_violation(check(no_length), "scheduler.lr_wsd_decay_samples"));
  EXPECT_TRUE(has_violation(check({"scheduler.lr_wsd_decay_samples=80"}), "scheduler.lr_wsd_decay_samples"));
}

// Bridge's null lr_decay_iters: validation writes it and the backend reads it through one function.
TEST(LrDecay, DecayItersDefaultToTrainIters) {
  Config config = load_config("tiny");
  config.train.train_iters = 40;
  config.scheduler.lr_decay_iters.reset();
  EXPECT_EQ(resolved_lr_decay_iters(config), 40);
  EXPECT_EQ(validate(config).config.scheduler.lr_decay_iters, 40);
  config.scheduler.lr_decay_iters = 30;
  EXPECT_EQ(resolved_lr_decay_iters(config), 30);
  config.scheduler.lr_decay_iters.reset();
  config.train.train_iters.reset();
  EXPECT_FALSE(resolved_lr_decay_iters(config).has_value());
}

}  // namespace
}  // namespace sg::config
