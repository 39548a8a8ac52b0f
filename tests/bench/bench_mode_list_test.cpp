// --compare parsing: IMPL[:SCOPE[+SCOPE...]][+RECOMPUTE] entries separated by commas.
#include "bench/mode_list.h"

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

#include "config/config.h"

namespace sg::bench {
namespace {

using graph::GraphImpl;

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
  EXPECT_EQ(modes[0], (GraphMode{GraphImpl::none, {}, {}}));
  EXPECT_EQ(modes[1], (GraphMode{GraphImpl::local, {}, {}}));
  EXPECT_EQ(modes[2], (GraphMode{GraphImpl::transformer_engine, {"attn"}, {}}));
  EXPECT_EQ(modes[3], (GraphMode{GraphImpl::transformer_engine, {"attn", "mlp"}, {}}));
  EXPECT_EQ(modes[3].label(), "transformer_engine:attn+mlp");
  for (const GraphMode& m : modes) EXPECT_EQ(parse_graph_mode(m.label()), m);  // label round-trips
}

TEST(ModeList, SpacesAreTrimmedAndScopeOrderIsKept) {
  const auto modes = parse_mode_list(" local:full_iteration , transformer_engine: mlp + attn ");
  ASSERT_EQ(modes.size(), 2u);
  EXPECT_EQ(modes[0], (GraphMode{GraphImpl::local, {"full_iteration"}, {}}));
  EXPECT_EQ(modes[1], (GraphMode{GraphImpl::transformer_engine, {"mlp", "attn"}, {}}));
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
  // Spelled right but not allowed: parsed here, refused by validate() (tests/bench/bench_options_test.cpp).
  EXPECT_EQ(usage_error("local:attn,transformer_engine:full_iteration"), "");
}

RecomputeMode recompute(std::string granularity, std::vector<std::string> modules = {},
                        std::optional<std::string> method = std::nullopt,
                        std::optional<int64_t> num_layers = std::nullopt) {
  return RecomputeMode{std::move(granularity), std::move(modules), std::move(method), num_layers};
}

TEST(ModeList, RecomputeSettingsFollowTheGraphMode) {
  const auto modes = parse_mode_list(
      "local,local+recompute_full,transformer_engine:attn+mlp+recompute_selective,"
      "transformer_engine:attn+mlp+recompute_selective=core_attn/mlp,local+recompute_full=block/2,"
      "none+recompute_full=uniform,transformer_engine+recompute_none");
  ASSERT_EQ(modes.size(), 7u);
  EXPECT_EQ(modes[0], (GraphMode{GraphImpl::local, {}, std::nullopt}));  // the recipe's recompute settings
  EXPECT_EQ(modes[1], (GraphMode{GraphImpl::local, {}, recompute("full")}));
  EXPECT_EQ(modes[2], (GraphMode{GraphImpl::transformer_engine, {"attn", "mlp"}, recompute("selective")}));
  EXPECT_EQ(modes[3],
            (GraphMode{GraphImpl::transformer_engine, {"attn", "mlp"}, recompute("selective", {"core_attn", "mlp"})}));
  EXPECT_EQ(modes[4], (GraphMode{GraphImpl::local, {}, recompute("full", {}, "block", 2)}));
  EXPECT_EQ(modes[5], (GraphMode{GraphImpl::none, {}, recompute("full", {}, "uniform")}));
  EXPECT_EQ(modes[6], (GraphMode{GraphImpl::transformer_engine, {}, recompute("none")}));
  EXPECT_EQ(modes[3].label(), "transformer_engine:attn+mlp+recompute_selective=core_attn/mlp");
  EXPECT_EQ(modes[4].label(), "local+recompute_full=block/2");
  for (const GraphMode& m : modes) EXPECT_EQ(parse_graph_mode(m.label()), m);  // label round-trips
  // Spaces around items and between modules are trimmed.
  EXPECT_EQ(parse_graph_mode(" transformer_engine: attn + recompute_selective = core_attn / mlp "),
            (GraphMode{GraphImpl::transformer_engine, {"attn"}, recompute("selective", {"core_attn", "mlp"})}));
}

TEST(ModeList, RecomputeSpellingErrorsAreUsageErrors) {
  EXPECT_NE(usage_error("recompute_full").find("goes after a graph mode, e.g. none+recompute_full"), std::string::npos);
  EXPECT_NE(usage_error("local+recompute_full+attn").find("must come last"), std::string::npos);
  EXPECT_NE(usage_error("local+recompute_full+recompute_none").find("must come last"), std::string::npos);
  EXPECT_NE(usage_error("local+recompute_ful").find("did you mean 'recompute_full'"), std::string::npos);
  EXPECT_NE(usage_error("transformer_engine:attn+recompte_full").find("did you mean 'recompute_full'"),
            std::string::npos);  // not spelt as a recompute item: read as a scope, still pointed at the right word
  EXPECT_NE(usage_error("local+recompute_selective=core_atn").find("did you mean 'core_attn'"), std::string::npos);
  EXPECT_NE(usage_error("local+recompute_selective=core_attn/core_attn").find("named twice"), std::string::npos);
  EXPECT_NE(usage_error("local+recompute_selective=core_attn//mlp").find("empty recompute module"), std::string::npos);
  EXPECT_NE(usage_error("local+recompute_selective=").find("names nothing"), std::string::npos);
  EXPECT_NE(usage_error("local+recompute_full=blok").find("did you mean 'block'"), std::string::npos);
  EXPECT_NE(usage_error("local+recompute_full=block/0").find("integer >= 1"), std::string::npos);
  EXPECT_NE(usage_error("local+recompute_full=uniform/x").find("integer >= 1"), std::string::npos);
  EXPECT_NE(usage_error("local+recompute_none=core_attn").find("takes no value"), std::string::npos);
  EXPECT_NE(usage_error("local+recompute_full,local+recompute_full").find("twice"), std::string::npos);
  // The same graph mode with and without recompute, or with two settings, are different modes.
  EXPECT_EQ(usage_error("local,local+recompute_full,local+recompute_full=block/1,local+recompute_selective"), "");
}

TEST(ModeList, RecomputeSettingsSetTheConfigKeys) {
  config::Config c;
  c.model.recompute_method = "block";
  c.model.recompute_num_layers = 3;
  config::Config full = c;
  apply_recompute_mode(full, recompute("full"));  // the recipe's method and layers where the mode names none
  EXPECT_EQ(full.model.recompute_granularity, "full");
  EXPECT_EQ(full.model.recompute_method, "block");
  EXPECT_EQ(full.model.recompute_num_layers, 3);
  EXPECT_EQ(recompute_setting(full), "full=block/3");
  config::Config plain;
  apply_recompute_mode(plain, recompute("full"));  // none set: uniform, 1 layer per chunk
  EXPECT_EQ(recompute_setting(plain), "full=uniform/1");
  apply_recompute_mode(plain, recompute("full", {}, "block", 2));
  EXPECT_EQ(recompute_setting(plain), "full=block/2");
  config::Config selective = c;
  apply_recompute_mode(selective, recompute("selective"));  // Megatron's default modules; no full-only keys
  EXPECT_EQ(selective.model.recompute_granularity, "selective");
  EXPECT_EQ(selective.model.recompute_modules, std::vector<std::string>{"core_attn"});
  EXPECT_FALSE(selective.model.recompute_method || selective.model.recompute_num_layers);
  EXPECT_EQ(recompute_setting(selective), "selective=core_attn");
  apply_recompute_mode(selective, recompute("selective", {"mlp", "layernorm"}));
  EXPECT_EQ(recompute_setting(selective), "selective=mlp/layernorm");
  apply_recompute_mode(selective, recompute("none"));
  EXPECT_FALSE(selective.model.recompute_granularity.has_value());
  EXPECT_EQ(recompute_setting(selective), "none");
}

}  // namespace
}  // namespace sg::bench
