// --compare parsing: IMPL[:SCOPE[+SCOPE...]] entries separated by commas.
#include "bench/mode_list.h"

#include <gtest/gtest.h>

#include "config/config.h"

namespace sg::bench {
namespace {

std::string usage_error(const std::string& text) {
  try {
    parse_mode_list(text);
  } catch (const config::ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(ModeList, TheIssuesExample) {
  const auto modes = parse_mode_list("none,local,transformer_engine:attn,transformer_engine:attn+mlp");
  ASSERT_EQ(modes.size(), 4u);
  EXPECT_EQ(modes[0], (GraphMode{"none", {}}));
  EXPECT_EQ(modes[1], (GraphMode{"local", {}}));
  EXPECT_EQ(modes[2], (GraphMode{"transformer_engine", {"attn"}}));
  EXPECT_EQ(modes[3], (GraphMode{"transformer_engine", {"attn", "mlp"}}));
  EXPECT_EQ(modes[3].label(), "transformer_engine:attn+mlp");
  for (const GraphMode& m : modes) EXPECT_EQ(parse_graph_mode(m.label()), m);  // label round-trips
}

TEST(ModeList, SpacesAreTrimmedAndScopeOrderIsKept) {
  const auto modes = parse_mode_list(" local:full_iteration , transformer_engine: mlp + attn ");
  ASSERT_EQ(modes.size(), 2u);
  EXPECT_EQ(modes[0], (GraphMode{"local", {"full_iteration"}}));
  EXPECT_EQ(modes[1], (GraphMode{"transformer_engine", {"mlp", "attn"}}));
}

TEST(ModeList, SpellingErrorsAreUsageErrors) {
  EXPECT_NE(usage_error("none,lokal").find("did you mean 'local'"), std::string::npos);
  EXPECT_NE(usage_error("transformer_engine:atn").find("did you mean 'attn'"), std::string::npos);
  EXPECT_NE(usage_error("none,,local").find("empty mode"), std::string::npos);
  EXPECT_NE(usage_error("").find("at least one mode"), std::string::npos);
  EXPECT_NE(usage_error("transformer_engine:attn+").find("empty scope"), std::string::npos);
  EXPECT_NE(usage_error("none:attn").find("takes no scope"), std::string::npos);
  EXPECT_NE(usage_error("local,none,local").find("'local' twice"), std::string::npos);
}

TEST(ModeList, CombinationsAreLeftToTheValidator) {
  // Spelled right but not allowed: parsed here, refused by validate() (tests/train/bench_options_test.cpp).
  EXPECT_EQ(usage_error("local:attn,transformer_engine:full_iteration"), "");
}

}  // namespace
}  // namespace sg::bench
