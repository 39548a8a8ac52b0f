// `stepgraph bench --compare` with activation recompute in the mode list, without a GPU: each mode's
// recompute keys, the memory plans (one per distinct recompute setting; the modes that differ only in
// graph keys share one), the pairing with the mode without recompute, the validator's refusals
// (rule 11, rule 16) before any GPU work, and the per-mode memory lines of --dryrun.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "bench/bench_options.h"
#include "bench/bench_plan.h"
#include "config/config.h"

namespace sg::bench {
namespace {

BenchPlan plan_tiny(const std::string& modes, std::vector<std::string> overrides = {}) {
  std::vector<std::string> args = {"-m", "llama", "-mr", "tiny", "--compare", modes};
  args.insert(args.end(), overrides.begin(), overrides.end());
  return plan_bench(parse_bench_args(args));
}

// The message of the BenchConfigError (exit 1) plan_tiny throws, "" when it plans.
std::string refusal(const std::string& modes) {
  try {
    plan_tiny(modes);
  } catch (const BenchConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(BenchRecomputePlan, EachModeGetsItsRecomputeKeysAndModesSharePlansByRecompute) {
  const BenchPlan plan = plan_tiny(
      "none,local,local+recompute_full,transformer_engine:attn+mlp,"
      "transformer_engine:attn+mlp+recompute_selective=core_attn/mlp");
  ASSERT_EQ(plan.modes.size(), 5u);
  const config::ModelConfig& none = plan.modes[0].config.model;
  const config::ModelConfig& full = plan.modes[2].config.model;
  const config::ModelConfig& selective = plan.modes[4].config.model;
  EXPECT_FALSE(none.recompute_granularity.has_value());
  EXPECT_EQ(full.recompute_granularity, "full");
  EXPECT_EQ(full.recompute_method, "uniform");
  EXPECT_EQ(full.recompute_num_layers, 1);
  EXPECT_EQ(selective.recompute_granularity, "selective");
  EXPECT_EQ(selective.recompute_modules, (std::vector<std::string>{"core_attn", "mlp"}));
  EXPECT_EQ(plan.modes[2].recompute, "full=uniform/1");
  EXPECT_EQ(plan.modes[4].recompute, "selective=core_attn/mlp");
  EXPECT_TRUE(plan.modes[2].model.recompute.on());
  EXPECT_FALSE(plan.modes[3].model.recompute.on());

  // Three memory plans: no recompute (none, local, transformer_engine:attn+mlp), full, selective.
  ASSERT_EQ(plan.memory_plans.size(), 3u);
  EXPECT_EQ(plan.memory_plans[0].modes, (std::vector<size_t>{0, 1, 3}));
  EXPECT_EQ(plan.memory_plans[1].modes, std::vector<size_t>{2});
  EXPECT_EQ(plan.memory_plans[2].modes, std::vector<size_t>{4});
  EXPECT_EQ(plan.modes[4].memory_plan, 2u);
  // Recompute gives activations back: smaller activations, a smaller arena.
  const MemoryPlanSummary& base = plan.memory_plans[0];
  for (size_t p : {1, 2}) {
    const MemoryPlanSummary& rc = plan.memory_plans[p];
    EXPECT_EQ(rc.activations.without_recompute(), base.activations.without_recompute()) << p;
    EXPECT_LT(rc.activations.with_recompute(), rc.activations.without_recompute()) << p;
    EXPECT_LT(rc.planned_bytes, base.planned_bytes) << p;
  }
  EXPECT_EQ(base.activations.with_recompute(), base.activations.without_recompute());

  // Each recomputing mode is paired with the same graph mode without recompute.
  EXPECT_EQ(plan.modes[2].without_recompute, 1u);
  EXPECT_EQ(plan.modes[4].without_recompute, 3u);
  EXPECT_FALSE(plan.modes[1].without_recompute.has_value());
  EXPECT_FALSE(plan_tiny("none,local+recompute_full").modes[1].without_recompute.has_value());
}

TEST(BenchRecomputePlan, FullAndSelectiveTakeTheRecipesSettingsWhereTheModeNamesNone) {
  const BenchPlan plan = plan_tiny("local,local+recompute_full,local+recompute_full=uniform/2,transformer_engine:attn+"
                                   "recompute_selective",
                                   {"model.recompute_method=block", "model.recompute_num_layers=3",
                                    "model.recompute_modules=[mlp]"});
  // A mode without a recompute setting keeps the overrides' (no granularity: recompute stays off).
  EXPECT_FALSE(plan.modes[0].config.model.recompute_granularity.has_value());
  EXPECT_EQ(plan.modes[1].recompute, "full=block/3");
  EXPECT_EQ(plan.modes[2].recompute, "full=uniform/2");
  EXPECT_EQ(plan.modes[3].recompute, "selective=mlp");  // full-only keys dropped, so rule 16 holds
  // Overrides that turn recompute on apply to the modes without a setting; recompute_none turns it off.
  const BenchPlan on = plan_tiny("local,local+recompute_none", {"model.recompute_granularity=selective"});
  EXPECT_EQ(on.modes[0].recompute, "selective=core_attn");  // Megatron's default recompute_modules
  EXPECT_EQ(on.modes[1].recompute, "none");
  EXPECT_EQ(on.memory_plans.size(), 2u);
}

TEST(BenchRecomputePlan, InvalidCombinationsAreRefusedWithTheValidatorsRules) {
  const std::string rule11 = refusal("local+recompute_full,transformer_engine:attn+mlp+recompute_full");
  EXPECT_NE(rule11.find("nothing was run"), std::string::npos) << rule11;
  EXPECT_NE(rule11.find("mode transformer_engine:attn+mlp+recompute_full: the configuration breaks"),
            std::string::npos) << rule11;
  EXPECT_NE(rule11.find("[rule 11] full activation recompute cannot run with transformer_engine scoped graphs"),
            std::string::npos) << rule11;
  EXPECT_EQ(rule11.find("mode local+recompute_full:"), std::string::npos) << rule11;  // local is allowed
  const std::string rule16 = refusal("local+recompute_selective=mla_up_proj");
  EXPECT_NE(rule16.find("[rule 16]"), std::string::npos) << rule16;
  EXPECT_NE(rule16.find("mla_up_proj"), std::string::npos) << rule16;
  // Full recompute with impl none and with local is what rule 11's fixes offer.
  EXPECT_EQ(refusal("none+recompute_full,local+recompute_full,transformer_engine:attn+recompute_selective"), "");
}

TEST(BenchRecomputePlan, DryrunPrintsEachModesActivationsAndArena) {
  const BenchPlan plan = plan_tiny("local,local+recompute_full");
  const std::string text = describe_plan(plan);
  EXPECT_NE(text.find("2 memory plans (recompute changes the activations)"), std::string::npos) << text;
  EXPECT_NE(text.find("memory plan 1 (local):\n  GPU memory plan"), std::string::npos) << text;
  EXPECT_NE(text.find("memory plan 2 (local+recompute_full):\n  GPU memory plan"), std::string::npos) << text;
  EXPECT_NE(text.find("mode local+recompute_full:\n"), std::string::npos) << text;
  EXPECT_NE(text.find("  model.recompute_granularity = full\n  model.recompute_modules = [core_attn]\n"
                      "  model.recompute_method = uniform\n  model.recompute_num_layers = 1\n"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("  activations per microbatch: 8 stack layers"), std::string::npos) << text;
  EXPECT_NE(text.find("recompute full, uniform"), std::string::npos) << text;
  EXPECT_NE(text.find("(memory plan 2 of 2); activations per microbatch"), std::string::npos) << text;
  EXPECT_NE(text.find("with recompute full=uniform/1"), std::string::npos) << text;
  EXPECT_NE(text.find("vs local (no recompute)"), std::string::npos) << text;
  // One plan: printed once, shared.
  EXPECT_NE(describe_plan(plan_tiny("none,local")).find("(shared by every mode)"), std::string::npos);
}

}  // namespace
}  // namespace sg::bench
