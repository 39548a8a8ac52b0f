// The CUDA-graph rules' edges: rule 15's bounds and its never-captured note, rule 8's note only for
// dropless MoE layers under transformer_engine, rule 7's fix naming the key that is missing, rule 16
// reporting one MoE value once, the --cuda_graph_scope flag that would be dropped, and a pattern error
// without a source location.
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "config/config.h"
#include "config/graph_flags.h"
#include "config/validate.h"
#include "validation_report_text.h"

namespace sg::config {
namespace {

using test::check_recipe;
using test::describe;

std::vector<Violation> violations_of(const ValidationReport& r, int rule) {
  std::vector<Violation> out;
  std::copy_if(r.violations.begin(), r.violations.end(), std::back_inserter(out),
               [rule](const Violation& v) { return v.rule == rule; });
  return out;
}

std::vector<Note> notes_of(const ValidationReport& r, int rule) {
  std::vector<Note> out;
  std::copy_if(r.notes.begin(), r.notes.end(), std::back_inserter(out),
               [rule](const Note& n) { return n.rule == rule; });
  return out;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

TEST(GraphRules, Rule15BoundsTheWarmupToWhatTheStepCounterHolds) {
  // 2^32 - 1 used to pass and narrow to -1 in the plan ("-1 eager warmup steps").
  for (const char* warmup : {"4294967295", "2147483647", "-1"}) {
    SCOPED_TRACE(warmup);
    const ValidationReport r = check_recipe(
        "llama/tiny", {"model.cuda_graph_impl=local", std::string("model.cuda_graph_warmup_steps=") + warmup});
    const auto v = violations_of(r, 15);
    ASSERT_EQ(v.size(), 1u) << describe(r);
    EXPECT_TRUE(contains(v[0].message, "from 0 to 2147483646")) << v[0].message;
    EXPECT_EQ(v[0].values.at(0).key, "model.cuda_graph_warmup_steps");
    EXPECT_TRUE(contains(v[0].fix, "model.cuda_graph_warmup_steps")) << v[0].fix;
  }
  const ValidationReport max =
      check_recipe("llama/tiny", {"model.cuda_graph_impl=local", "model.cuda_graph_warmup_steps=2147483646"});
  EXPECT_TRUE(violations_of(max, 15).empty()) << describe(max);
  EXPECT_TRUE(contains(rule_summary(15), "2^31 - 2"));
}

TEST(GraphRules, Rule15NotesAWarmupThatNeverCaptures) {
  const ValidationReport r = check_recipe(
      "llama/tiny", {"model.cuda_graph_impl=local", "train.train_iters=6", "model.cuda_graph_warmup_steps=6"});
  EXPECT_TRUE(r.ok()) << describe(r);
  const auto n = notes_of(r, 15);
  ASSERT_EQ(n.size(), 1u) << describe(r);
  EXPECT_TRUE(contains(n[0].message, "never captured")) << n[0].message;
  // One step left to capture in: no note; graphs off: nothing to capture, no note.
  EXPECT_TRUE(notes_of(check_recipe("llama/tiny", {"model.cuda_graph_impl=local", "train.train_iters=6",
                                                   "model.cuda_graph_warmup_steps=5"}),
                       15)
                  .empty());
  EXPECT_TRUE(
      notes_of(check_recipe("llama/tiny", {"train.train_iters=6", "model.cuda_graph_warmup_steps=6"}), 15).empty());
}

TEST(GraphRules, Rule8NotesOnlyDroplessMoeLayersInTheMoeScope) {
  const std::vector<std::string> moe_scope = {"model.cuda_graph_impl=transformer_engine",
                                              "model.cuda_graph_scope=attn,moe"};
  const auto with = [&](std::vector<std::string> extra) {
    extra.insert(extra.begin(), moe_scope.begin(), moe_scope.end());
    return check_recipe("moe/tiny_moe", extra);
  };
  EXPECT_EQ(notes_of(with({}), 8).size(), 1u) << describe(with({}));
  // A capacity factor is token-drop, with or without padding: Megatron's own setting, no note.
  const ValidationReport drop = with({"model.moe_expert_capacity_factor=1.0"});
  EXPECT_TRUE(drop.ok()) << describe(drop);
  EXPECT_TRUE(notes_of(drop, 8).empty()) << describe(drop);
  // An invalid factor is rule 16's error, not a note about dropless routing.
  const ValidationReport invalid = with({"model.moe_expert_capacity_factor=-1"});
  EXPECT_FALSE(violations_of(invalid, 16).empty()) << describe(invalid);
  EXPECT_TRUE(notes_of(invalid, 8).empty()) << describe(invalid);
  // No MoE layers: rule 7's error alone.
  for (const ValidationReport& r :
       {check_recipe("llama/tiny", {"model.cuda_graph_impl=transformer_engine", "model.cuda_graph_scope=moe"}),
        with({"model.moe_layer_freq=[0,0,0,0]"})}) {
    EXPECT_EQ(violations_of(r, 7).size(), 1u) << describe(r);
    EXPECT_TRUE(notes_of(r, 8).empty()) << describe(r);
  }
}

TEST(GraphRules, Rule7FixNamesWhatMakesALayerMoe) {
  const auto fix_of = [](const ValidationReport& r) {
    const auto v = violations_of(r, 7);
    EXPECT_EQ(v.size(), 1u) << describe(r);
    return v.empty() ? std::string() : v[0].fix;
  };
  const std::string dense =
      fix_of(check_recipe("llama/tiny", {"model.cuda_graph_impl=transformer_engine", "model.cuda_graph_scope=moe"}));
  EXPECT_TRUE(contains(dense, "model.num_moe_experts > 0")) << dense;
  // Experts set, but the hybrid pattern has no E layer.
  const std::string hybrid = fix_of(
      check_recipe("hybrid/tiny_hybrid",
                   {"model.cuda_graph_impl=transformer_engine", "model.cuda_graph_scope=moe_router,moe_preprocess",
                    "model.num_moe_experts=8", "model.moe_token_dispatcher_type=alltoall"}));
  EXPECT_TRUE(contains(hybrid, "E (MoE) layers to model.hybrid_override_pattern")) << hybrid;
  EXPECT_FALSE(contains(hybrid, "num_moe_experts")) << hybrid;
  // Experts set, but moe_layer_freq marks no block.
  const ValidationReport no_blocks =
      check_recipe("moe/tiny_moe", {"model.moe_layer_freq=[0,0,0,0]", "model.cuda_graph_impl=transformer_engine",
                                    "model.cuda_graph_scope=attn,moe_router,moe_preprocess"});
  const std::string freq = fix_of(no_blocks);
  EXPECT_TRUE(contains(freq, "1s in model.moe_layer_freq")) << freq;
  EXPECT_FALSE(contains(freq, "num_moe_experts")) << freq;
  EXPECT_TRUE(contains(describe(no_blocks), "model.moe_layer_freq = ")) << describe(no_blocks);
  // The mlp fix offers moe for every MoE layer (rule 8: dropless graphs whole), not only token-drop.
  const std::string mlp = fix_of(
      check_recipe("moe/tiny_moe", {"model.cuda_graph_impl=transformer_engine", "model.cuda_graph_scope=attn,mlp"}));
  EXPECT_FALSE(contains(mlp, "token-drop MoE)")) << mlp;
  EXPECT_TRUE(contains(mlp, "dropless or token-drop")) << mlp;
}

TEST(GraphRules, MoeValuesAreReportedOnceWithTheRealCap) {
  const ValidationReport typo = check_recipe("moe/tiny_moe", {"model.moe_token_dispatcher_type=alltoal"});
  ASSERT_EQ(typo.violations.size(), 1u) << describe(typo);
  EXPECT_TRUE(contains(typo.violations[0].fix, "did you mean 'alltoall'")) << describe(typo);
  // A Megatron value the engine does not run is still refused, once.
  EXPECT_EQ(check_recipe("moe/tiny_moe", {"model.moe_router_load_balancing_type=sinkhorn"}).violations.size(), 1u);
  for (const char* experts : {"1025", "2000000", "-1"}) {
    const ValidationReport r = check_recipe("moe/tiny_moe", {std::string("model.num_moe_experts=") + experts});
    ASSERT_EQ(r.violations.size(), 1u) << describe(r);
    EXPECT_TRUE(contains(r.violations[0].message, "between 0 and 1024")) << describe(r);
  }
  EXPECT_TRUE(check_recipe("moe/tiny_moe", {"model.num_moe_experts=1024"}).ok());
}

TEST(GraphFlags, AScopeFlagThatWouldBeDroppedIsAnError) {
  Config none;  // impl none, as the benchmark recipes
  try {
    apply_cuda_graph_overrides(none, {std::nullopt, std::vector<std::string>{"attn"}});
    FAIL() << "the scope was dropped silently";
  } catch (const ConfigError& e) {
    EXPECT_TRUE(contains(e.what(), "--cuda_graph_impl transformer_engine")) << e.what();
    EXPECT_TRUE(contains(e.what(), "--cuda_graph_impl local")) << e.what();
    EXPECT_EQ(e.exit_code(), 2);
  }
  // An explicit impl none ignores the scope (Bridge's early return); an impl applies it.
  Config off;
  apply_cuda_graph_overrides(off, {std::string("none"), std::vector<std::string>{"attn"}});
  EXPECT_TRUE(off.model.cuda_graph_scope.empty());
  Config on;
  apply_cuda_graph_overrides(on, {std::string("transformer_engine"), std::vector<std::string>{"attn"}});
  EXPECT_EQ(on.model.cuda_graph_scope, std::vector<std::string>{"attn"});
}

TEST(GraphFlags, TheScopeListIsEveryScopeName) {
  const std::string list = cuda_graph_scope_list();
  for (const std::string& scope : cuda_graph_scope_names()) EXPECT_TRUE(contains(list, scope)) << scope;
  EXPECT_TRUE(contains(list, "moe_preprocess"));
  EXPECT_TRUE(contains(list, "mamba"));
}

// A pattern's error names the key, the letter and the kinds, and no source line.
TEST(PatternRule, AnUnknownLetterIsNamedWithoutASourceLocation) {
  const std::string text = describe(check_recipe("llama/tiny", {"model.hybrid_override_pattern=M*-x"}));
  EXPECT_NE(text.find("character 4 'x' is not a layer kind"), std::string::npos) << text;
  EXPECT_EQ(text.find(".cpp:"), std::string::npos) << text;
}

// Megatron's '|' and '/' in a pattern are said for what they are, naming the key, in validation too.
TEST(PatternRule, MegatronsStageAndMtpSeparatorsAreNamed) {
  std::string text = describe(check_recipe("llama/tiny", {"model.hybrid_override_pattern=M*-|M*-"}));
  EXPECT_TRUE(contains(text, "model.hybrid_override_pattern = M*-|M*-: '|' (character 4) is Megatron's "
                             "pipeline-stage separator")) << text;
  EXPECT_TRUE(contains(text, "write model.hybrid_override_pattern = M*-M*-")) << text;
  text = describe(check_recipe("llama/tiny", {"model.hybrid_layer_pattern=M*-/*-"}));
  EXPECT_TRUE(contains(text, "multi-token-prediction (MTP) layers, which stepgraph does not implement")) << text;
  EXPECT_TRUE(contains(text, "write model.hybrid_override_pattern = M*-")) << text;
  // One violation, naming what to remove: the separators are no layers, so no num_layers mismatch either.
  const ValidationReport staged =
      check_recipe("llama/tiny", {"model.hybrid_override_pattern=M*-|", "model.num_layers=3"});
  ASSERT_EQ(staged.violations.size(), 1u) << describe(staged);
  EXPECT_TRUE(contains(staged.violations[0].fix, "remove Megatron's '|' stage separators")) << describe(staged);
}

}  // namespace
}  // namespace sg::config
