// The lr decay table (config/lr_decay.h): the styles validation accepts, the ones rule 16 notes as not
// implemented and the ones the backend trains with are one list.
#include "config/lr_decay.h"

#include <gtest/gtest.h>

#include "config/validate.h"
#include "core/error.h"
#include "test_util.h"

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

TEST(LrDecay, ValidationAcceptsEveryNamedStyleAndTheBackendTrainsTheImplementedOnes) {
  EXPECT_EQ(lr_decay_style_names(), (std::vector<std::string>{"constant", "linear", "cosine", "inverse-square-root", "WSD"}));
  for (const LrDecayStyleName& s : lr_decay_styles()) {
    const ValidationReport report = validate(load_config("tiny", {std::string("scheduler.lr_decay_style=") + s.name}));
    EXPECT_FALSE(has_violation(report, "scheduler.lr_decay_style")) << s.name;
    const std::vector<std::string> unimplemented = unimplemented_features(report.config);
    const bool noted = !unimplemented.empty() && unimplemented.back().rfind(std::string(s.name) + " lr decay", 0) == 0;
    EXPECT_EQ(noted, !s.style.has_value()) << s.name;
    if (s.style) {
      EXPECT_EQ(lr_decay_style(s.name), *s.style);
      EXPECT_FALSE(unimplemented_lr_decay_style(s.name).has_value());
    } else {
      EXPECT_EQ(unimplemented_lr_decay_style(s.name), std::string(s.name));
      EXPECT_EQ(test::thrown_message([&] { lr_decay_style(s.name); }),
                std::string("scheduler.lr_decay_style = ") + s.name +
                    " is not implemented yet; use constant, linear or cosine");
    }
  }
  EXPECT_TRUE(
      has_violation(validate(load_config("tiny", {"scheduler.lr_decay_style=exponential"})), "scheduler.lr_decay_style"));
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
