// `stepgraph bench` flags -> config, without a GPU: Megatron-Bridge's run_script.py flags, its
// _set_cuda_graph_overrides semantics, the recipe/override/flag order, and the plan that validates
// every compared mode before any GPU work.
#include "bench/bench_options.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "bench/bench_plan.h"
#include "config/config.h"

namespace sg::bench {
namespace {

// What `f` throws: "config: <message>" for a ConfigError (usage, exit 2), "error: <message>" for any
// other sg::Error (exit 1), "" when it does not throw.
template <class F>
std::string thrown(F&& f) {
  try {
    f();
  } catch (const config::ConfigError& e) {
    return std::string("config: ") + e.what();
  } catch (const Error& e) {
    return std::string("error: ") + e.what();
  }
  return "";
}

BenchOptions tiny(std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {"-m", "llama", "-mr", "tiny"};
  args.insert(args.end(), extra.begin(), extra.end());
  return parse_bench_args(args);
}

TEST(BenchArgs, ParsesTheBridgeCommandLine) {
  const BenchOptions o = parse_bench_args({"-m", "llama", "-mr", "1b", "--task", "pretrain", "-g", "h200", "-c",
                                           "bf16", "-ng", "1", "--cuda_graph_impl", "transformer_engine",
                                           "--cuda_graph_scope", "attn,mlp", "-mb", "2", "-gb", "8", "-sl", "512",
                                           "optimizer.lr=1e-4", "--steps", "20", "--warmup", "2", "--floor-steps",
                                           "5", "--json", "out.json", "--trace", "t.json", "--plain", "--no-power",
                                           "-d"});
  EXPECT_EQ(o.model_family, "llama");
  EXPECT_EQ(o.model_recipe, "1b");
  EXPECT_EQ(o.task, "pretrain");
  EXPECT_EQ(o.gpu, "h200");
  EXPECT_EQ(o.compute_dtype, "bf16");
  EXPECT_EQ(o.num_gpus, 1);
  EXPECT_EQ(o.cuda_graph_impl.value_or(""), "transformer_engine");
  EXPECT_EQ(o.cuda_graph_scope.value_or(""), "attn,mlp");
  EXPECT_EQ(o.micro_batch_size.value_or(0), 2);
  EXPECT_EQ(o.global_batch_size.value_or(0), 8);
  EXPECT_EQ(o.seq_length.value_or(0), 512);
  EXPECT_EQ(o.overrides, std::vector<std::string>{"optimizer.lr=1e-4"});
  EXPECT_EQ(o.steps, 20);
  EXPECT_EQ(o.warmup.value_or(-1), 2);
  EXPECT_EQ(o.floor_steps, 5);
  EXPECT_EQ(o.json_path, "out.json");
  EXPECT_EQ(o.trace_path, "t.json");
  EXPECT_TRUE(o.plain);
  EXPECT_FALSE(o.power);
  EXPECT_TRUE(o.dryrun);
  EXPECT_FALSE(o.compare.has_value());
  EXPECT_FALSE(plan_bench(o).power);
  EXPECT_TRUE(parse_bench_args({"-m", "llama", "-mr", "tiny"}).power);  // sampled unless asked not to
}

TEST(BenchArgs, LongNamesEqualsFormAndDefaults) {
  const BenchOptions o = parse_bench_args({"--model_family_name=LLAMA", "--model_recipe_name=Tiny", "--steps=7",
                                           "--num_gpus=1", "--compare=none,local"});
  EXPECT_EQ(o.model_family, "llama");  // lower-cased, as Bridge's lower_str does
  EXPECT_EQ(o.model_recipe, "tiny");
  EXPECT_EQ(o.steps, 7);
  EXPECT_EQ(o.compare.value_or(""), "none,local");
  const BenchOptions d = parse_bench_args({});
  EXPECT_EQ(d.steps, 50);
  EXPECT_EQ(d.floor_steps, 10);
  EXPECT_FALSE(d.warmup.has_value());
  EXPECT_EQ(d.task, "pretrain");
  EXPECT_EQ(d.compute_dtype, "bf16");
  EXPECT_EQ(d.num_gpus, 1);
}

TEST(BenchArgs, UsageErrorsNameTheProblem) {
  EXPECT_NE(thrown([] { parse_bench_args({"--floor_steps", "3"}); }).find("did you mean '--floor-steps'"),
            std::string::npos);
  EXPECT_NE(thrown([] { parse_bench_args({"-m"}); }).find("config: -m needs a value"), std::string::npos);
  EXPECT_NE(thrown([] { parse_bench_args({"--json", "--plain"}); }).find("--json needs a value"), std::string::npos);
  EXPECT_NE(thrown([] { parse_bench_args({"--steps", "ten"}); }).find("expects an integer, got 'ten'"),
            std::string::npos);
  EXPECT_NE(thrown([] { parse_bench_args({"tiny"}); }).find("unexpected argument 'tiny'"), std::string::npos);
  EXPECT_NE(thrown([] { parse_bench_args({"--plain=yes"}); }).find("takes no value"), std::string::npos);
}

TEST(BenchArgs, HelpListsEveryFlag) {
  const std::string help = bench_flags_help();
  for (const char* flag : {"-m, --model_family_name FAMILY", "-mr, --model_recipe_name NAME", "--task TASK",
                           "-g, --gpu GPU", "-c, --compute_dtype DTYPE", "-ng, --num_gpus N", "--cuda_graph_impl IMPL",
                           "--cuda_graph_scope A,B", "-mb, --micro_batch_size N", "-gb, --global_batch_size N",
                           "-sl, --seq_length N", "-d, --dryrun", "--compare MODES", "--steps N", "--warmup N",
                           "--floor-steps N", "--json FILE", "--trace FILE", "--plain", "--no-power"}) {
    EXPECT_NE(help.find(flag), std::string::npos) << flag;
  }
}

TEST(BenchOptionsCheck, UnknownValuesAreUsageErrorsKnownButUnimplementedAreNot) {
  EXPECT_NE(thrown([] { check_bench_options(tiny({"--task", "finetune"})); }).find("config: --task finetune"),
            std::string::npos);
  EXPECT_NE(thrown([] { check_bench_options(tiny({"--task", "sft"})); }).find("error: --task sft is not implemented yet"),
            std::string::npos);
  EXPECT_NE(thrown([] { check_bench_options(tiny({"-c", "fp4"})); }).find("config: -c fp4"), std::string::npos);
  EXPECT_NE(thrown([] { check_bench_options(tiny({"-c", "fp8_cs"})); }).find("error: -c fp8_cs is not implemented yet"),
            std::string::npos);
  EXPECT_NE(thrown([] { check_bench_options(tiny({"-ng", "0"})); }).find("config: -ng 0"), std::string::npos);
  EXPECT_EQ(thrown([] { check_bench_options(tiny({"-ng", "8"})); }), "") << "data parallel: planned, checked later";
  EXPECT_NE(thrown([] { check_bench_options(tiny({"--cuda_graph_impl", "full"})); }).find("config:"),
            std::string::npos);
  EXPECT_NE(thrown([] { check_bench_options(tiny({"--cuda_graph_scope", "attn,mpl"})); }).find("did you mean 'mlp'"),
            std::string::npos);
  EXPECT_NE(thrown([] { check_bench_options(parse_bench_args({"-m", "llama"})); }).find("llama/tiny"),
            std::string::npos);  // names the shipped recipes
  EXPECT_NE(thrown([] { check_bench_options(tiny({"--steps", "0"})); }).find("config: --steps 0"), std::string::npos);
  EXPECT_NE(thrown([] { check_bench_options(tiny({"--trace", "t.json", "--floor-steps", "0"})); }).find("--floor-steps"),
            std::string::npos);
  EXPECT_EQ(thrown([] { check_bench_options(tiny({"-g", "h200", "-c", "BF16", "-ng", "1"})); }), "");
}

TEST(BenchOptionsCheck, CompareExcludesTheSingleModeFlagsAndGraphOverrides) {
  EXPECT_NE(thrown([] { check_bench_options(tiny({"--compare", "none,local", "--cuda_graph_impl", "local"})); })
                .find("config: --compare sets the CUDA-graph mode"),
            std::string::npos);
  EXPECT_NE(thrown([] { check_bench_options(tiny({"--compare", "none,local", "model.cuda_graph_scope=attn"})); })
                .find("model.cuda_graph_scope=attn"),
            std::string::npos);
  EXPECT_NE(thrown([] { check_bench_options(tiny({"--compare", "none,lokal"})); }).find("did you mean 'local'"),
            std::string::npos);
  EXPECT_EQ(thrown([] { check_bench_options(tiny({"--compare", "none,local", "optimizer.lr=1e-4"})); }), "");
}

// Bridge's _set_cuda_graph_overrides, case by case.
TEST(BridgeCudaGraphOverrides, AnImplOtherThanNoneTurnsBothRngTrackersOn) {
  for (const char* impl : {"local", "transformer_engine"}) {
    config::Config c;
    apply_cuda_graph_overrides(c, {std::string(impl), std::nullopt});
    EXPECT_EQ(c.model.cuda_graph_impl, impl);
    EXPECT_TRUE(c.model.use_te_rng_tracker) << impl;
    EXPECT_TRUE(c.rng.te_rng_tracker) << impl;
  }
}

TEST(BridgeCudaGraphOverrides, ImplNoneTurnsTheTrackersOffAndIgnoresTheScope) {
  config::Config c;
  c.model.use_te_rng_tracker = c.rng.te_rng_tracker = true;
  c.model.cuda_graph_impl = "local";
  apply_cuda_graph_overrides(c, {std::string("none"), std::vector<std::string>{"attn"}});
  EXPECT_EQ(c.model.cuda_graph_impl, "none");
  EXPECT_FALSE(c.model.use_te_rng_tracker);
  EXPECT_FALSE(c.rng.te_rng_tracker);
  EXPECT_TRUE(c.model.cuda_graph_scope.empty());
  // No flag at all on a recipe whose impl is none: the same normalisation (newer Bridge does it too).
  config::Config d;
  d.model.use_te_rng_tracker = d.rng.te_rng_tracker = true;
  apply_cuda_graph_overrides(d, {});
  EXPECT_FALSE(d.model.use_te_rng_tracker);
  EXPECT_FALSE(d.rng.te_rng_tracker);
}

TEST(BridgeCudaGraphOverrides, FullIterationKeepsTheLossNanCheck) {
  const std::vector<std::optional<std::vector<std::string>>> full_scopes = {
      std::nullopt, std::vector<std::string>{}, std::vector<std::string>{"full_iteration"}};
  for (const auto& scope : full_scopes) {
    config::Config c;
    ASSERT_TRUE(c.rerun_state_machine.check_for_nan_in_loss);
    apply_cuda_graph_overrides(c, {std::string("local"), scope});
    // Bridge turns it off; stepgraph's flags work inside the graph (a deviation, docs/configuration.md).
    EXPECT_TRUE(c.rerun_state_machine.check_for_nan_in_loss);
    EXPECT_FALSE(c.ddp.check_for_nan_in_grad);  // untouched (default false)
  }
  config::Config scoped;
  apply_cuda_graph_overrides(scoped, {std::string("transformer_engine"), std::vector<std::string>{"attn", "mlp"}});
  EXPECT_TRUE(scoped.rerun_state_machine.check_for_nan_in_loss);
  EXPECT_EQ(scoped.model.cuda_graph_scope, (std::vector<std::string>{"attn", "mlp"}));
  // local with a module scope is not a full iteration: the check stays (and validate() refuses it).
  config::Config invalid;
  apply_cuda_graph_overrides(invalid, {std::string("local"), std::vector<std::string>{"attn"}});
  EXPECT_TRUE(invalid.rerun_state_machine.check_for_nan_in_loss);
}

TEST(BridgeCudaGraphOverrides, ScopeFlagAloneKeepsTheRecipeImpl) {
  config::Config c;
  c.model.cuda_graph_impl = "transformer_engine";
  c.model.use_te_rng_tracker = c.rng.te_rng_tracker = true;
  apply_cuda_graph_overrides(c, {std::nullopt, std::vector<std::string>{"mlp"}});
  EXPECT_EQ(c.model.cuda_graph_impl, "transformer_engine");
  EXPECT_EQ(c.model.cuda_graph_scope, std::vector<std::string>{"mlp"});
  EXPECT_TRUE(c.model.use_te_rng_tracker);
}

TEST(BenchConfig, RecipeThenOverridesThenFlagsThenMockData) {
  BenchOptions o = tiny({"-mb", "2", "-gb", "4", "-sl", "128", "--warmup", "5", "train.micro_batch_size=8",
                         "dataset.mock=true", "optimizer.lr=1e-4"});
  const config::Config c = bench_config(o, graph_flags(o));
  EXPECT_EQ(c.train.micro_batch_size.value_or(0), 2);  // the flag wins over the override, as in Bridge
  EXPECT_EQ(c.train.global_batch_size.value_or(0), 4);
  EXPECT_EQ(c.model.seq_length, 128);
  EXPECT_EQ(c.dataset.seq_length.value_or(0), 128);
  EXPECT_EQ(c.model.cuda_graph_warmup_steps, 5);
  EXPECT_TRUE(c.dataset.mock);  // the bench always measures on mock data
  EXPECT_DOUBLE_EQ(c.optimizer.lr.value_or(0), 1e-4);
  EXPECT_EQ(c.model.num_layers, 4);  // from recipes/llama/tiny.yaml
  EXPECT_NE(thrown([] { BenchOptions u = tiny(); u.model_recipe = "huge"; bench_config(u, {}); }).find("config:"),
            std::string::npos);  // unknown recipe: a usage error naming the shipped ones
}

TEST(BenchPlan, CompareBuildsOneValidatedConfigPerModeOnOneModel) {
  const BenchPlan plan = plan_bench(tiny({"--compare", "none,local,transformer_engine:attn,transformer_engine:attn+mlp",
                                          "--steps", "20", "--floor-steps", "4", "--warmup", "2",
                                          "rerun_state_machine.check_for_nan_in_loss=true"}));
  ASSERT_EQ(plan.modes.size(), 4u);
  EXPECT_EQ(plan.recipe, "llama/tiny");
  EXPECT_EQ(plan.modes[0].label, "none");
  EXPECT_EQ(plan.modes[1].label, "local");
  EXPECT_EQ(plan.modes[2].label, "transformer_engine:attn");
  EXPECT_EQ(plan.modes[3].label, "transformer_engine:attn+mlp");
  const config::Config& none = plan.modes[0].config;
  const config::Config& local = plan.modes[1].config;
  const config::Config& te = plan.modes[3].config;
  EXPECT_EQ(none.model.cuda_graph_impl, "none");
  EXPECT_FALSE(none.model.use_te_rng_tracker);
  EXPECT_TRUE(none.rerun_state_machine.check_for_nan_in_loss);  // the override stands where graphs allow it
  EXPECT_EQ(local.model.cuda_graph_impl, "local");
  EXPECT_EQ(local.model.cuda_graph_scope, std::vector<std::string>{"full_iteration"});  // normalized
  EXPECT_TRUE(local.rerun_state_machine.check_for_nan_in_loss);  // kept (graph_flags.h: a deviation from Bridge)
  EXPECT_TRUE(local.model.use_te_rng_tracker && local.rng.te_rng_tracker);
  EXPECT_EQ(te.model.cuda_graph_scope, (std::vector<std::string>{"attn", "mlp"}));
  EXPECT_TRUE(te.rerun_state_machine.check_for_nan_in_loss);
  EXPECT_EQ(plan.model.num_layers, 4);
  EXPECT_EQ(plan.model.hidden_size, 256);
  EXPECT_EQ(plan.batch.micro_batch_size, 4);
  EXPECT_EQ(plan.warmup_steps, 2);
  EXPECT_EQ(plan.steps_per_mode(), 2 + 1 + 20 + 4);
  EXPECT_FALSE(plan.trace);
  const std::string text = describe_plan(plan);
  EXPECT_NE(text.find("mode transformer_engine:attn+mlp:"), std::string::npos);
  EXPECT_NE(text.find("model.cuda_graph_scope = [attn, mlp]"), std::string::npos);
  EXPECT_EQ(text.find("rerun_state_machine.check_for_nan_in_loss = false"), std::string::npos);
}

TEST(BenchPlan, SingleModeFromTheBridgeFlags) {
  const BenchPlan plan =
      plan_bench(tiny({"--cuda_graph_impl", "transformer_engine", "--cuda_graph_scope", "attn,mlp"}));
  ASSERT_EQ(plan.modes.size(), 1u);
  EXPECT_EQ(plan.modes[0].label, "transformer_engine:attn+mlp");
  EXPECT_TRUE(plan.modes[0].config.rng.te_rng_tracker);
  const BenchPlan recipe_default = plan_bench(tiny());
  EXPECT_EQ(recipe_default.modes[0].label, "none");
  EXPECT_EQ(recipe_default.warmup_steps, 3);  // the recipe's (Bridge's default) cuda_graph_warmup_steps
}

TEST(BenchPlan, InvalidCombinationsAreRefusedByTheValidatorWithEveryViolation) {
  const std::string scope = thrown([] { plan_bench(tiny({"--compare", "none,local:attn,transformer_engine:full_iteration"})); });
  EXPECT_EQ(scope.rfind("error: ", 0), 0u) << scope;  // exit 1, not a usage error
  EXPECT_NE(scope.find("mode local:attn"), std::string::npos) << scope;
  EXPECT_NE(scope.find("mode transformer_engine:full_iteration"), std::string::npos) << scope;
  EXPECT_NE(scope.find("[rule 4]"), std::string::npos) << scope;
  EXPECT_NE(scope.find("nothing was run"), std::string::npos) << scope;
  // NaN checks are no longer refused with a whole-step graph (rule 5 is a note: the flags are
  // device-side), so every mode keeps the gradient check.
  const BenchPlan nan = plan_bench(tiny({"--compare", "none,local", "ddp.check_for_nan_in_grad=true"}));
  ASSERT_EQ(nan.modes.size(), 2u);
  EXPECT_TRUE(nan.modes[1].config.ddp.check_for_nan_in_grad);
  // MoE recipes are built (issue 11).
  EXPECT_NO_THROW(plan_bench(parse_bench_args({"-m", "moe", "-mr", "tiny_moe"})));
}

TEST(BenchPlan, ModeLabelFromANormalizedConfig) {
  config::Config c;
  EXPECT_EQ(mode_label(c), "none");
  c.model.cuda_graph_impl = "local";
  c.model.cuda_graph_scope = {"full_iteration"};
  EXPECT_EQ(mode_label(c), "local");
  c.model.cuda_graph_impl = "transformer_engine";
  c.model.cuda_graph_scope = {"attn", "mlp"};
  EXPECT_EQ(mode_label(c), "transformer_engine:attn+mlp");
}

}  // namespace
}  // namespace sg::bench

// The rest of Bridge's run_script.py flags (bench/bridge_flags.h): accepted, so a Bridge command line
// pastes unchanged; what stepgraph cannot do is "not implemented yet" (exit 1), never "unknown option".
namespace sg::bench {
namespace {

TEST(BridgeFlags, ParallelSizesOfOneRunOthersAreNotImplementedYet) {
  EXPECT_EQ(thrown([] {
              check_bench_options(tiny({"-tp", "1", "-pp", "1", "-cp", "1", "-ep", "1", "-vp", "None", "-et"}));
            }),
            "");
  EXPECT_EQ(thrown([] { check_bench_options(tiny({"--tensor_model_parallel_size=1", "-et", "1", "-vp", "-1"})); }),
            "");
  for (const char* flag : {"-tp", "-pp", "-cp", "-ep", "-vp", "-et"}) {
    const std::string message = thrown([&] { check_bench_options(tiny({flag, "2"})); });
    EXPECT_NE(message.find(std::string("error: not implemented yet: ") + flag + " 2"), std::string::npos) << message;
  }
  EXPECT_NE(thrown([] { parse_bench_args({"-tp", "two"}); }).find("config: -tp expects an integer"),
            std::string::npos);
  EXPECT_NE(thrown([] { check_bench_options(tiny({"-tp", "0"})); }).find("config:"), std::string::npos);
}

TEST(BridgeFlags, MappedFlagsSetTheConfigAndWinOverOverrides) {
  const BenchOptions o = tiny({"--lr", "1e-4", "optimizer.lr=5e-4", "--min_lr=1e-5", "--warmup_iters", "2",
                               "--num_layers", "2", "--hidden_size", "128"});
  const config::Config c = bench_config(o, graph_flags(o));
  EXPECT_DOUBLE_EQ(c.optimizer.lr.value_or(0), 1e-4);
  EXPECT_DOUBLE_EQ(c.optimizer.min_lr, 1e-5);
  EXPECT_EQ(c.scheduler.lr_warmup_iters, 2);
  EXPECT_EQ(c.model.num_layers, 2);
  EXPECT_EQ(c.model.hidden_size, 128);
  // --num_moe_experts maps onto the config: llama/tiny's MLPs become 8 experts behind Bridge's default dispatcher
  // (allgather; on one GPU every dispatcher is the same local permutation).
  const BenchPlan moe = plan_bench(tiny({"--num_moe_experts", "8"}));
  EXPECT_EQ(moe.modes[0].config.model.num_moe_experts.value_or(0), 8);
  EXPECT_EQ(moe.modes[0].config.model.moe_token_dispatcher_type, "allgather");
}

TEST(BridgeFlags, MaxStepsIsTheStepsPerMode) {
  // llama/tiny: 3 warmup + 1 capture + 10 floor steps, so -ms 20 leaves 6 measured steps.
  const BenchPlan plan = plan_bench(tiny({"-ms", "20"}));
  EXPECT_EQ(plan.steps, 6);
  EXPECT_EQ(plan.steps_per_mode(), 20);
  EXPECT_NE(thrown([] { plan_bench(tiny({"--max_steps", "14"})); }).find("leaves no measured step"),
            std::string::npos);
  EXPECT_NE(thrown([] { check_bench_options(tiny({"-ms", "20", "--steps", "5"})); }).find("give one"),
            std::string::npos);
}

TEST(BridgeFlags, DefaultsAcceptedOthersNotImplementedLauncherFlagsIgnored) {
  EXPECT_EQ(thrown([] {
              check_bench_options(tiny({"--domain", "llm", "--data", "mock", "--use_megatron_fsdp", "false",
                                        "--optimizer_type", "adam", "-vb", "0"}));
            }),
            "");
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"--data", "c4"}, {"--save_dir", "/ckpt"}, {"--use_megatron_fsdp", "true"}, {"-en"},
           {"--c4_train_shards", "6", "7"}, {"--optimizer_type", "muon"}}) {
    const std::string message = thrown([&] { check_bench_options(tiny(args)); });
    EXPECT_NE(message.find("error: not implemented yet: " + args[0]), std::string::npos) << message;
  }
  // --c4_train_shards takes several values and stops before the next flag or override.
  const BenchOptions many = tiny({"--c4_train_shards", "6", "7", "--steps", "4", "optimizer.lr=1e-3"});
  EXPECT_EQ(many.steps, 4);
  EXPECT_EQ(many.overrides, std::vector<std::string>{"optimizer.lr=1e-3"});
  // -cb's bash commands hold '=' (Bridge's are usually exports): only a section.key=value ends its values.
  const BenchOptions bash = tiny({"-cb", "export NCCL_DEBUG=INFO", "A=1 echo x", "optimizer.lr=1e-3"});
  EXPECT_EQ(bash.overrides, std::vector<std::string>{"optimizer.lr=1e-3"});
  EXPECT_EQ(thrown([&] { check_bench_options(bash); }), "");
  const BenchOptions launcher = tiny({"-a", "acct", "-p", "batch", "-t", "00:10:00", "-wdp", "proj", "--detach",
                                      "false", "-hf", "tok", "--dryrun"});
  EXPECT_EQ(thrown([&] { check_bench_options(launcher); }), "");
  EXPECT_EQ(launcher.bridge.ignored, (std::vector<std::string>{"-a", "-p", "-t", "-wdp", "--detach", "-hf"}));
  EXPECT_NE(describe_plan(plan_bench(launcher)).find("ignored (Megatron-Bridge launcher flags"), std::string::npos);
  EXPECT_NE(bench_flags_help().find("-tp"), std::string::npos);
  EXPECT_NE(bench_flags_help().find("--max_steps"), std::string::npos);
}

// Bridge's --most_recent_k is train's checkpoint.most_recent_k; the bench saves no checkpoint, so only its defaults
// (None, or -1: keep every one) are accepted, and another value says why and where retention is.
TEST(BridgeFlags, MostRecentKSaysTheBenchSavesNothingAndNamesTrainsKey) {
  EXPECT_EQ(thrown([] { check_bench_options(tiny({"--most_recent_k", "None"})); }), "");
  EXPECT_EQ(thrown([] { check_bench_options(tiny({"--most_recent_k", "-1"})); }), "");
  const std::string message = thrown([] { check_bench_options(tiny({"--most_recent_k", "2"})); });
  EXPECT_NE(message.find("--most_recent_k 2 (the bench saves nothing, so there is nothing to keep; train keeps the "
                         "k newest checkpoints with checkpoint.most_recent_k)"),
            std::string::npos)
      << message;
}

// Bridge's _set_recompute_overrides: -rl N is full recompute, method block, N layers; --recompute_modules is
// selective with those modules. Both at once is Megatron's refusal (num_layers with selective).
TEST(BridgeFlags, RecomputeFlagsHaveBridgesSideEffects) {
  const BenchOptions rl = tiny({"-rl", "2"});
  const config::Config full = bench_config(rl, graph_flags(rl));
  EXPECT_EQ(full.model.recompute_granularity.value_or(""), "full");
  EXPECT_EQ(full.model.recompute_method.value_or(""), "block");
  EXPECT_EQ(full.model.recompute_num_layers.value_or(0), 2);
  EXPECT_EQ(plan_bench(rl).modes[0].recompute, "full=block/2");
  const BenchOptions modules = tiny({"--recompute_modules", "core_attn,mlp"});
  const config::Config selective = bench_config(modules, graph_flags(modules));
  EXPECT_EQ(selective.model.recompute_granularity.value_or(""), "selective");
  EXPECT_EQ(selective.model.recompute_modules, (std::vector<std::string>{"core_attn", "mlp"}));
  EXPECT_EQ(plan_bench(modules).modes[0].recompute, "selective=core_attn/mlp");
  EXPECT_NE(thrown([] { tiny({"-rl", "2", "--recompute_modules", "mlp"}); })
                .find("config: -rl and --recompute_modules"),
            std::string::npos);
  EXPECT_NE(thrown([] { tiny({"-rl", "0"}); }).find("config: -rl expects a positive integer"), std::string::npos);
}

// The bench always measures on mock data: asking for real data is refused with the override that works.
TEST(BenchConfig, RealDataIsRefusedWithTheOverrideThatWorks) {
  EXPECT_NE(thrown([] { plan_bench(tiny({"dataset.mock=false"})); }).find("config: 'dataset.mock=false': stepgraph "
                                                                          "bench always measures on mock data"),
            std::string::npos);
  const std::string demo = thrown([] { plan_bench(parse_bench_args({"-m", "llama", "-mr", "demo"})); });
  EXPECT_NE(demo.find("config: llama/demo reads real data"), std::string::npos) << demo;
  EXPECT_NE(demo.find("add dataset.data_path=null"), std::string::npos) << demo;
  const BenchPlan plan = plan_bench(parse_bench_args({"-m", "llama", "-mr", "demo", "dataset.data_path=null"}));
  EXPECT_TRUE(plan.modes[0].config.dataset.mock);
}

// Step counts are range-checked (a mode's steps are counted in int) and summed in 64 bits.
TEST(BenchArgs, StepCountsHaveALimit) {
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"-ms", "4294967310"}, {"-ms", "9223372036854775807"}, {"--steps", "2147483647"},
           {"--floor-steps", "2147483647"}, {"--warmup", "1000001"}}) {
    const std::string message = thrown([&] { tiny(args); });
    EXPECT_NE(message.find("config: " + args[0] + " " + args[1] + ": at most 1000000 steps per mode"),
              std::string::npos)
        << message;
  }
  const BenchPlan plan = plan_bench(tiny({"--steps", "1000000", "--floor-steps", "1000000", "--warmup", "1000000"}));
  EXPECT_EQ(plan.steps_per_mode(), 3000001);
  EXPECT_NE(thrown([] { plan_bench(tiny({"model.cuda_graph_warmup_steps=2000000000"})); })
                .find("config: model.cuda_graph_warmup_steps 2000000000"),
            std::string::npos);
}

// Overrides of keys the bench never reads are refused, naming the key; rule 15's note (warmup against
// train_iters, which the bench does not run) is not printed.
TEST(BenchArgs, OverridesTheBenchIgnoresAreRefused) {
  for (const char* text : {"train.train_iters=5", "checkpoint.save=/tmp/x", "train.eval_interval=5",
                           "dataset.split=99,1,0"}) {
    const std::string message = thrown([&] { check_bench_options(tiny({text})); });
    const std::string key = std::string(text).substr(0, std::string(text).find('='));
    EXPECT_NE(message.find("config: stepgraph bench does not read " + key), std::string::npos) << message;
  }
  const std::string text = describe_plan(plan_bench(tiny({"--cuda_graph_impl", "local", "--warmup", "60"})));
  EXPECT_NE(text.find("capture at step 61"), std::string::npos) << text;
  EXPECT_EQ(text.find("rule 15"), std::string::npos) << text;
}

// logger.* overrides (Bridge perf command lines carry them) are accepted but not used: validated as train
// validates them, and named in the one note the command prints on stderr.
TEST(BenchArgs, LoggerOverridesAreAcceptedValidatedAndNamed) {
  const BenchOptions options = tiny({"logger.log_interval=5", "logger.tensorboard_dir=/tmp/tb", "optimizer.lr=1e-4",
                                     "logger.log_interval=7"});
  const BenchPlan plan = plan_bench(options);
  EXPECT_EQ(plan.modes[0].config.logger.log_interval, 7);  // read as train reads it, then not used
  const std::string note = unused_overrides_note(options);
  EXPECT_EQ(note, "stepgraph bench: accepted but not used: logger.log_interval, logger.tensorboard_dir (the bench "
                  "writes its own report: --json, --html, --trace)");
  EXPECT_EQ(unused_overrides_note(tiny({"optimizer.lr=1e-4"})), "");
  // Still a config key with a valid value: a usage error (exit 2), or the validator's rule (exit 1).
  const std::string not_integer = thrown([] { plan_bench(tiny({"logger.log_interval=abc"})); });
  EXPECT_NE(not_integer.find("config: override 'logger.log_interval=abc'"), std::string::npos) << not_integer;
  const std::string unknown = thrown([] { plan_bench(tiny({"logger.no_such_key=perf"})); });
  EXPECT_EQ(unknown.rfind("config: ", 0), 0u) << unknown;
  EXPECT_NE(unknown.find("no_such_key"), std::string::npos) << unknown;
  const std::string zero = thrown([] { plan_bench(tiny({"logger.log_interval=0"})); });
  EXPECT_NE(zero.find("error: "), std::string::npos) << zero;
  EXPECT_NE(zero.find("logger.log_interval"), std::string::npos) << zero;
  // The other overrides the bench does not read are still refused.
  EXPECT_NE(thrown([] { plan_bench(tiny({"logger.log_interval=5", "dataset.mock=false"})); })
                .find("config: 'dataset.mock=false': stepgraph bench always measures on mock data"),
            std::string::npos);
  EXPECT_NE(thrown([] { plan_bench(tiny({"logger.log_interval=5", "checkpoint.save=/tmp/x"})); })
                .find("config: stepgraph bench does not read checkpoint.save"),
            std::string::npos);
}

// The report files are probed before any GPU work: usage errors (exit 2).
TEST(BenchArgs, OutputPathsAreCheckedUpFront) {
  EXPECT_NE(thrown([] { check_bench_options(tiny({"--json", "/proc/nope/x.json"})); })
                .find("config: --json /proc/nope/x.json: the folder /proc/nope does not exist"),
            std::string::npos);
  EXPECT_NE(thrown([] { check_bench_options(tiny({"--html", "/tmp"})); }).find("config: --html /tmp is a folder"),
            std::string::npos);
  EXPECT_NE(thrown([] { tiny({"--json", ""}); }).find("config: --json needs a file name"), std::string::npos);
  EXPECT_NE(thrown([] { check_bench_options(tiny({"--json", "/tmp/sg_b.json", "--trace", "/tmp/../tmp/sg_b.json"})); })
                .find("config: --json and --trace both write"),
            std::string::npos);
  EXPECT_EQ(thrown([] { check_bench_options(tiny({"--json", "/tmp/sg_b.json", "--html", "/tmp/sg_b.html"})); }), "");
}

// Duplicates are found on what runs, not on the spelling.
TEST(BenchPlan, CompareRefusesTwoSpellingsOfOneMode) {
  for (const char* list : {"local,local:full_iteration", "transformer_engine:attn+mlp,transformer_engine:mlp+attn",
                           "none,none+recompute_none", "local+recompute_full,local+recompute_full=uniform/1"}) {
    const std::string message = thrown([&] { plan_bench(tiny({"--compare", list})); });
    const std::string first = std::string(list).substr(0, std::string(list).find(','));
    EXPECT_NE(message.find("config: --compare lists '" + first + "' and '"), std::string::npos) << message;
    EXPECT_NE(message.find("which run the same configuration"), std::string::npos) << message;
  }
  // With -rl the recipe recomputes, so none and none+recompute_none differ.
  EXPECT_EQ(plan_bench(tiny({"-rl", "2", "--compare", "none,none+recompute_none"})).modes.size(), 2U);
}

// A key set by a flag is named by its flag in the fix: setting the key would change nothing.
TEST(BenchPlan, ViolationsNameTheFlagThatSetTheKey) {
  const std::string message = thrown([] { plan_bench(tiny({"-mb", "8", "-gb", "4", "train.global_batch_size=8"})); });
  EXPECT_NE(message.find("train.global_batch_size = 4 (set by -gb)"), std::string::npos) << message;
  EXPECT_NE(message.find("fix: set -gb to a multiple of 8"), std::string::npos) << message;
}

TEST(BenchArgs, PolishedRefusals) {
  EXPECT_NE(thrown([] { tiny({"--cuda_graph_impl", "local", "--cuda_graph_impl", "none"}); })
                .find("config: stepgraph bench: --cuda_graph_impl is given twice"),
            std::string::npos);
  EXPECT_NE(thrown([] { tiny({"-mb", "2", "--micro_batch_size", "4"}); }).find("(as -mb and --micro_batch_size)"),
            std::string::npos);
  EXPECT_NE(thrown([] { tiny({"--lr", "1", "--lr", "2"}); }).find("--lr is given twice"), std::string::npos);
  const std::string nsys = thrown([] { check_bench_options(tiny({"-en"})); });
  EXPECT_NE(nsys.find("not implemented yet: -en (run nsys profile"), std::string::npos) << nsys;
  EXPECT_EQ(nsys.find("not implemented yet (run"), std::string::npos) << nsys;
  EXPECT_EQ(thrown([] { check_bench_options(tiny({"--dataset_paths"})); }), "");  // nargs *: nothing named
  EXPECT_NE(thrown([] { check_bench_options(parse_bench_args({"-m", "llama", "-mr", "tiny_moe"})); })
                .find("config: no recipe llama/tiny_moe: tiny_moe is in family moe; use -m moe -mr tiny_moe"),
            std::string::npos);
  EXPECT_NE(thrown([] { check_bench_options(tiny({"-g", "bogus"})); }).find("config: -g bogus is not a GPU"),
            std::string::npos);
  EXPECT_EQ(thrown([] { check_bench_options(tiny({"-g", "H100"})); }), "");
  EXPECT_NE(thrown([] { check_bench_options(tiny({"--task", "lora"})); }).find("error: --task lora is not implemented"),
            std::string::npos);
}

// A malformed recompute value after '+' gets its own error, not the order rule.
TEST(BenchArgs, RecomputeValueWithPlusGetsTheRealError) {
  const std::string message = thrown([] { parse_mode_list("local+recompute_full=uniform/+1"); });
  EXPECT_NE(message.find("layer count '+1' must be an integer >= 1"), std::string::npos) << message;
  EXPECT_NE(thrown([] { parse_mode_list("local+recompute_full+attn"); }).find("must come last"), std::string::npos);
}

}  // namespace
}  // namespace sg::bench
