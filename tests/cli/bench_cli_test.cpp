// `stepgraph bench` as a user runs it, on any machine: the help text, --dryrun, and the exit codes of
// everything that must be refused before GPU work (rule violations 1, not implemented 1, usage 2),
// plus the no-GPU error where there is no GPU.
#include <gtest/gtest.h>

#include "process_util.h"
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "core/strings.h"
#include "cuda/device.h"

namespace {

using Result = sg::test::CommandResult;

Result bench(const std::vector<std::string>& args) {
  std::vector<std::string> all = {"bench"};
  all.insert(all.end(), args.begin(), args.end());
  return sg::test::run_stepgraph(all);
}

bool has(const Result& r, const std::string& text) { return r.output.find(text) != std::string::npos; }

TEST(BenchCli, HelpDocumentsTheBridgeFlagsAndExamples) {
  const Result r = bench({"--help"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  for (const char* text : {"-mr, --model_recipe_name NAME", "-ng, --num_gpus N", "--cuda_graph_scope A,B", "--compare MODES",
                           "--floor-steps N", "--trace FILE", "--json FILE", "Examples:", "docs/performance.md",
                           "recompute_selective[=MODULE/MODULE...]", "recompute_selective=core_attn/mlp",
                           "local+recompute_full"}) {
    EXPECT_TRUE(has(r, text)) << text << "\n" << r.output;
  }
}

TEST(BenchCli, DryrunPrintsThePlanWithoutAGpu) {
  const Result r = bench({"-m", "llama", "-mr", "tiny", "-g", "h200", "-c", "bf16", "-ng", "1", "--compare",
                          "none,local,transformer_engine:attn+mlp", "--steps", "5", "--dryrun"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(has(r, "stepgraph bench llama/tiny: 8 layers: (*-)x4 as 4 GPT blocks, hidden 256")) << r.output;
  EXPECT_TRUE(has(r, "mode local:\n  model.cuda_graph_impl = local\n  model.cuda_graph_scope = [full_iteration]"))
      << r.output;
  EXPECT_TRUE(has(r, "mode transformer_engine:attn+mlp:")) << r.output;
  EXPECT_TRUE(has(r, "5 measured steps")) << r.output;
  EXPECT_TRUE(has(r, "activations per microbatch: 8 stack layers")) << r.output;
  // Activation recompute as a recipe override applies to every compared mode (one memory plan).
  const Result recompute = bench({"-m", "llama", "-mr", "tiny", "--compare", "none,local", "--dryrun",
                                  "model.recompute_granularity=full", "model.recompute_method=uniform",
                                  "model.recompute_num_layers=1"});
  EXPECT_EQ(recompute.exit_code, 0) << recompute.output;
  EXPECT_TRUE(has(recompute, "recompute full, uniform")) << recompute.output;
}

// Recompute settings in the mode list: each mode's activation plan and arena side by side in --dryrun,
// invalid combinations refused with the validator's rule (exit 1), misspellings a usage error (exit 2).
TEST(BenchCli, RecomputeModesPlanTheirOwnMemoryWithoutAGpu) {
  const Result r = bench({"-m", "llama", "-mr", "tiny", "--compare",
                          "local,local+recompute_full,transformer_engine:attn+mlp,"
                          "transformer_engine:attn+mlp+recompute_selective=core_attn/mlp",
                          "--dryrun"});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const char* text : {"3 memory plans (recompute changes the activations)",
                           "memory plan 1 (local, transformer_engine:attn+mlp):", "mode local+recompute_full:\n",
                           "mode transformer_engine:attn+mlp+recompute_selective=core_attn/mlp:\n",
                           "  model.recompute_modules = [core_attn, mlp]\n", "recompute selective (core_attn, mlp)"}) {
    EXPECT_TRUE(has(r, text)) << text << "\n" << r.output;
  }
  // One memory line per mode: its planned arena and activations; recomputing modes against the same
  // graph mode without recompute, which saves memory (a negative arena difference).
  size_t memory_lines = 0;
  for (size_t at = r.output.find("  planned arena "); at != std::string::npos;
       at = r.output.find("  planned arena ", at + 1)) {
    ++memory_lines;
  }
  EXPECT_EQ(memory_lines, 4u) << r.output;
  for (const char* text : {"(memory plan 2 of 3); activations per microbatch", "with recompute full=uniform/1",
                           "; arena -", "vs local (no recompute)", "vs transformer_engine:attn+mlp (no recompute)"}) {
    EXPECT_TRUE(has(r, text)) << text << "\n" << r.output;
  }

  // Refused before any GPU work: each with the exit code and the words it must print.
  const struct {
    const char* modes;
    int exit_code;
    std::vector<std::string> says;
  } refused[] = {
      {"local+recompute_full,transformer_engine:attn+mlp+recompute_full", 1,
       {"mode transformer_engine:attn+mlp+recompute_full: the configuration breaks", "[rule 11]", "nothing was run"}},
      {"local+recompute_selective=mla_up_proj", 1, {"[rule 16]", "mla_up_proj"}},
      {"local+recompute_selective=core_atn", 2, {"did you mean 'core_attn'"}},
  };
  for (const auto& c : refused) {
    const Result out = bench({"-m", "llama", "-mr", "tiny", "--compare", c.modes});
    EXPECT_EQ(out.exit_code, c.exit_code) << c.modes << "\n" << out.output;
    for (const std::string& text : c.says) EXPECT_TRUE(has(out, text)) << text << "\n" << out.output;
    EXPECT_FALSE(has(out, "needs a GPU")) << out.output;
  }
}

TEST(BenchCli, ValidatorRefusalsExitOneBeforeAnyGpuWork) {
  const Result r = bench({"-m", "llama", "-mr", "tiny", "--cuda_graph_impl", "local", "--cuda_graph_scope", "attn"});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(has(r, "[rule 4]")) << r.output;
  EXPECT_TRUE(has(r, "nothing was run")) << r.output;
  EXPECT_FALSE(has(r, "needs a GPU")) << r.output;  // refused by the validator, not by the device check
}

TEST(BenchCli, MoeRecipesPlanEveryGraphMode) {
  const Result r = bench({"-m", "moe", "-mr", "small_moe", "--compare",
                          "none,local,transformer_engine:attn+moe_router+moe_preprocess,transformer_engine:attn+moe",
                          "--dryrun"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(has(r, "stepgraph bench moe/small_moe: 24 layers: (*E)x12 as 12 GPT blocks")) << r.output;
  EXPECT_TRUE(has(r, "mode transformer_engine:attn+moe_router+moe_preprocess:")) << r.output;
  EXPECT_TRUE(has(r, "mode transformer_engine:attn+moe:")) << r.output;
  const Result a3b = bench({"-m", "moe", "-mr", "a3b_proxy", "--dryrun"});
  EXPECT_EQ(a3b.exit_code, 0) << a3b.output;
  EXPECT_TRUE(has(a3b, "stepgraph bench moe/a3b_proxy: 8 layers: (*E)x4 as 4 GPT blocks, hidden 2048")) << a3b.output;
}

TEST(BenchCli, UnimplementedBridgeValuesExitOneUsageErrorsExitTwo) {
  const Result fp8 = bench({"-m", "llama", "-mr", "tiny", "-c", "fp8_cs"});
  EXPECT_EQ(fp8.exit_code, 1) << fp8.output;
  EXPECT_TRUE(has(fp8, "-c fp8_cs is not implemented yet")) << fp8.output;
  const Result flag = bench({"-m", "llama", "-mr", "tiny", "--stepz", "3"});
  EXPECT_EQ(flag.exit_code, 2) << flag.output;
  EXPECT_TRUE(has(flag, "did you mean '--steps'")) << flag.output;
  const Result recipe = bench({"-m", "llama", "-mr", "huge"});
  EXPECT_EQ(recipe.exit_code, 2) << recipe.output;
  EXPECT_TRUE(has(recipe, "llama/tiny")) << recipe.output;  // names the shipped recipes
  const Result mode = bench({"-m", "llama", "-mr", "tiny", "--compare", "none,graphs"});
  EXPECT_EQ(mode.exit_code, 2) << mode.output;
}

TEST(BenchCli, DataParallelIsPlannedAndCheckedOnTheCpu) {
  // -ng N: global batch = micro batch x microbatches x N, checked before any GPU work.
  const Result planned = bench({"-m", "llama", "-mr", "tiny", "-ng", "2", "-gb", "16", "--dryrun"});
  EXPECT_EQ(planned.exit_code, 0) << planned.output;
  EXPECT_TRUE(has(planned, "micro batch 4 x 2 microbatches x 2 data-parallel ranks")) << planned.output;
  const Result indivisible = bench({"-m", "llama", "-mr", "tiny", "-ng", "2", "--dryrun"});
  EXPECT_EQ(indivisible.exit_code, 1) << indivisible.output;
  EXPECT_TRUE(has(indivisible, "micro_batch_size x data_parallel_size = 4 x 2")) << indivisible.output;
  EXPECT_TRUE(has(indivisible, "set train.global_batch_size to a multiple of 8")) << indivisible.output;
}

TEST(BenchCli, MoreRanksThanGpusNamesTheDeviceCount) {
  const int gpus = sg::cuda::device_count();
  const int ranks = std::max(2, gpus + 1);
  const Result r = bench({"-m", "llama", "-mr", "tiny", "-ng", std::to_string(ranks), "-gb", std::to_string(4 * ranks)});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  if (gpus == 0) {
    // No GPU at all: "use -ng 1" would fail too, so it says there is none.
    EXPECT_TRUE(has(r, "stepgraph bench needs a GPU")) << r.output;
    EXPECT_FALSE(has(r, "use -ng")) << r.output;
  } else {
    EXPECT_TRUE(has(r, sg::strprintf("-ng %d needs %d GPUs on this node; it has %d", ranks, ranks, gpus))) << r.output;
  }
}

// Under a launcher the dryrun applies the real run's rank check instead of planning one rank.
TEST(BenchCli, DryrunUnderALauncherChecksTheRankCount) {
  const Result r =
      sg::test::run_stepgraph({"launch", "-n", "2", "--", "bench", "-m", "llama", "-mr", "tiny", "--dryrun"});
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_TRUE(has(r, "-ng 1, but 2 ranks were started")) << r.output;
  EXPECT_FALSE(has(r, "1 data-parallel rank")) << r.output;
}

// Report files are probed before anything runs: a usage error, exit 2, with or without --dryrun.
TEST(BenchCli, UnwritableReportPathsAreUsageErrors) {
  for (const std::vector<std::string>& flags : std::vector<std::vector<std::string>>{
           {"--json", "/proc/nope/x.json"}, {"--html", "/tmp"}, {"--json", ""}, {"--trace", "/proc/nope/t.json"}}) {
    std::vector<std::string> args = {"-m", "llama", "-mr", "tiny", "--compare", "none,local"};
    args.insert(args.end(), flags.begin(), flags.end());
    const Result r = bench(args);
    EXPECT_EQ(r.exit_code, 2) << flags[0] << " " << flags[1] << "\n" << r.output;
    EXPECT_FALSE(has(r, "needs a GPU")) << r.output;
  }
}

TEST(BenchCli, BridgeFlagsItDoesNotImplementAreNotImplementedYetNotUnknown) {
  const Result tp = bench({"-m", "llama", "-mr", "tiny", "-tp", "2", "--dryrun"});
  EXPECT_EQ(tp.exit_code, 1) << tp.output;
  EXPECT_TRUE(has(tp, "not implemented yet: -tp 2")) << tp.output;
  EXPECT_FALSE(has(tp, "unknown option")) << tp.output;
  const Result ones = bench({"-m", "llama", "-mr", "tiny", "-tp", "1", "-pp", "1", "-cp", "1", "-ep", "1", "-vp",
                             "None", "-ms", "20", "-a", "account", "-p", "partition", "--dryrun"});
  EXPECT_EQ(ones.exit_code, 0) << ones.output;
  EXPECT_TRUE(has(ones, "6 measured steps")) << ones.output;
  EXPECT_TRUE(has(ones, "ignored (Megatron-Bridge launcher flags")) << ones.output;
  EXPECT_TRUE(has(ones, "GPU memory plan")) << ones.output;  // computed without a GPU
}

// A Bridge perf command line's logger.* overrides: accepted, named once on stderr, still validated.
TEST(BenchCli, LoggerOverridesAreNamedOnStderrAndStillValidated) {
  const Result r = bench({"-m", "llama", "-mr", "tiny", "--dryrun", "logger.log_interval=5"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(has(r, "stepgraph bench: accepted but not used: logger.log_interval (the bench writes its own report: "
                     "--json, --html, --trace)\n"))
      << r.output;
  EXPECT_TRUE(has(r, "stepgraph bench llama/tiny")) << r.output;  // the plan
  const std::vector<std::string> stderr_only = {"bench", "-m", "llama", "-mr", "tiny", "--dryrun",
                                                "logger.log_interval=5"};
  EXPECT_EQ(sg::test::run_stepgraph(stderr_only, /*merge_stderr=*/false).output.find("accepted but not used"),
            std::string::npos);
  const Result bad_value = bench({"-m", "llama", "-mr", "tiny", "--dryrun", "logger.log_interval=abc"});
  EXPECT_EQ(bad_value.exit_code, 2) << bad_value.output;
  EXPECT_TRUE(has(bad_value, "logger.log_interval=abc")) << bad_value.output;
  const Result unknown = bench({"-m", "llama", "-mr", "tiny", "--dryrun", "logger.no_such_key=1"});
  EXPECT_EQ(unknown.exit_code, 2) << unknown.output;
  EXPECT_TRUE(has(unknown, "no_such_key")) << unknown.output;
  const Result real_data = bench({"-m", "llama", "-mr", "tiny", "--dryrun", "logger.log_interval=5",
                                  "dataset.mock=false"});
  EXPECT_EQ(real_data.exit_code, 2) << real_data.output;
  EXPECT_FALSE(has(real_data, "accepted but not used")) << real_data.output;  // nothing before a refusal
}

TEST(BenchCli, WithoutAGpuItSaysSo) {
  if (sg::cuda::device_count() > 0) GTEST_SKIP() << "a GPU is present; tests/bench/bench_gpu_test.cpp runs the bench";
  const Result r = bench({"-m", "llama", "-mr", "tiny", "--compare", "none,local"});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_TRUE(has(r, "stepgraph bench needs a GPU")) << r.output;
}

}  // namespace
