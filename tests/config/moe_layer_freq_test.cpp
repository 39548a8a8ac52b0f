// Megatron's model.moe_layer_freq (config/moe_layer_freq.cpp): its list expression ("([1]*3+[0])*2") is user input,
// from a recipe or an override, so its size and its nesting are bounded before anything is built.
#include "config/moe_layer_freq.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "config/config.h"
#include "config/validate.h"

namespace sg::config {
namespace {

std::string expand_error(const std::string& text, int64_t num_layers) {
  try {
    (void)expand_moe_layer_freq({text}, num_layers);
  } catch (const ConfigError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no ConfigError for " << text;
  return "";
}

TEST(MoeLayerFreq, ExpandsMegatronsForms) {
  EXPECT_EQ(expand_moe_layer_freq({"2"}, 4), (std::vector<int>{1, 0, 1, 0}));
  EXPECT_EQ(expand_moe_layer_freq({"1", "0", "1"}, 3), (std::vector<int>{1, 0, 1}));
  EXPECT_EQ(expand_moe_layer_freq({"([1]*3+[0])*2"}, 8), (std::vector<int>{1, 1, 1, 0, 1, 1, 1, 0}));
  EXPECT_EQ(expand_moe_layer_freq({"((([1])))*2"}, 2), (std::vector<int>{1, 1}));
}

// Found with the layer_patterns fuzz harness (tests/fuzz/layer_patterns_fuzz.cpp): a repeat was checked against the
// length limit only after it was built, so "([1]*99999)*999999" allocated 10^11 entries (out of memory) before the
// limit was looked at; a sum of in-bounds terms was not checked at all.
TEST(MoeLayerFreq, ARepeatPastTheLimitIsRefusedBeforeItIsBuilt) {
  const std::string e = expand_error("([1]*100000)*1000", 8);
  EXPECT_NE(e.find("model.moe_layer_freq"), std::string::npos) << e;
  EXPECT_NE(e.find("100000000 entries"), std::string::npos) << e;
  EXPECT_NE(e.find("at most 100000"), std::string::npos) << e;
  EXPECT_NE(expand_error("([1,0]*50000+[1])*999999", 8).find("at most 100000"), std::string::npos);
  std::string sum = "[1]*100000";
  for (int i = 0; i < 1000; ++i) sum += "+[1]*100000";  // each term in bounds, the sum not
  EXPECT_NE(expand_error(sum, 8).find("200000 entries, at most 100000"), std::string::npos);
}

// Found with the same harness: each '(' recursed, so a long run of them overflowed the stack (a crash, not an error).
TEST(MoeLayerFreq, DeepParenthesesAreRefusedNotRecursedInto) {
  const std::string deep = std::string(100, '(') + "[1]" + std::string(100, ')');
  const std::string e = expand_error(deep, 1);
  EXPECT_NE(e.find("model.moe_layer_freq"), std::string::npos) << e;
  EXPECT_NE(e.find("parentheses nest deeper than 32"), std::string::npos) << e;
  const std::string deeper = std::string(100000, '(') + "[1]" + std::string(100000, ')');
  EXPECT_NE(expand_error(deeper, 1).find("parentheses nest deeper than 32"), std::string::npos);
}

// Found while fuzzing the overrides (by hand, from the harness's inputs): the integer form expanded to one entry per
// block for any model.num_layers, and validate's check for layer kinds the engine does not build listed every block
// too, so `stepgraph validate llama/tiny model.num_layers=1000000000000` ended in std::bad_alloc after gigabytes.
TEST(MoeLayerFreq, MoreBlocksThanTheLimitAreRefusedNotExpanded) {
  const std::string e = expand_error("1", 10'000'000);
  EXPECT_NE(e.find("model.num_layers = 10000000"), std::string::npos) << e;
  EXPECT_NE(e.find("at most 100000"), std::string::npos) << e;
  EXPECT_NE(expand_error("2", 1'000'000'000'000).find("at most 100000"), std::string::npos);
  // A MoE key on a dense model makes validate look for MoE blocks in model.moe_layer_freq.
  for (const std::vector<std::string>& overrides : std::vector<std::vector<std::string>>{
           {"model.num_layers=1000000000000"}, {"model.num_layers=1000000000000", "model.moe_router_topk=2"}}) {
    Config c = load_config("llama/tiny", overrides);
    const ValidationReport report = validate(c);  // reports model.num_layers (rule 16), throws nothing
    EXPECT_FALSE(report.violations.empty());
  }
}

}  // namespace
}  // namespace sg::config
