// Issue 6 acceptance (and issue 12's for hybrid Mamba patterns): the training step under cuda_graph_impl
// none, local, and transformer_engine with attn, mlp and attn+mlp gives BITWISE identical losses at every
// step and bitwise identical final weights and optimizer state — with dropout on (so the graph-safe RNG
// matters) and two microbatches.
// Also: the graphs take only their own instantiation memory, the NaN checks stop the run in eager
// and scoped modes, naming the step and the check, and the hybrid spelling of the same model
// ("*-" x n, one layer per letter) trains bitwise like n GPT blocks in every mode. And every activation
// recompute setting, in every mode the rules allow, trains bitwise like eager without recompute.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "core/strings.h"
#include "cuda/device.h"
#include "graph_mode_runs.h"
#include "model/init.h"
#include "model/layer_registry.h"
#include "test_util.h"
#include "train/backend_factory.h"
#include "config/config.h"
#include "data/batch.h"
#include "data/blended_dataset.h"
#include "train/gpu_backend.h"
#include "train/mock_training.h"
#include "config/model_config.h"
#include "train/trainer.h"
#include "config/validate.h"

namespace sg::train {
namespace {

using graph_runs::bitwise_equal;
using graph_runs::kSteps;
using graph_runs::run_mode;
using graph_runs::RunResult;

config::Config tiny_with(const std::vector<std::string>& extra) { return graph_runs::recipe_with("llama/tiny", extra); }
using graph_runs::recipe_with;

// A graph mode: its overrides and the number of graphs it must create.
struct Mode {
  std::string name;
  std::vector<std::string> overrides;
  int graphs;
};

// A graph mode's run against the eager one: every loss, the final weights and moments bit for bit; the
// expected number of graphs, replayed; graph memory within 1% of the arena.
void expect_mode_bitwise_equal_to_eager(const char* name, const RunResult& r, const RunResult& eager, int graphs) {
  ASSERT_EQ(r.losses.size(), eager.losses.size());
  for (size_t i = 0; i < r.losses.size(); ++i) {
    uint32_t a, b;
    std::memcpy(&a, &r.losses[i], 4);
    std::memcpy(&b, &eager.losses[i], 4);
    EXPECT_EQ(a, b) << "step " << i + 1 << ": loss " << r.losses[i] << " vs eager " << eager.losses[i];
  }
  EXPECT_TRUE(bitwise_equal(r.state.main_weights, eager.state.main_weights)) << "final fp32 weights differ";
  EXPECT_TRUE(bitwise_equal(r.state.exp_avg, eager.state.exp_avg)) << "final exp_avg differs";
  EXPECT_TRUE(bitwise_equal(r.state.exp_avg_sq, eager.state.exp_avg_sq)) << "final exp_avg_sq differs";
  EXPECT_EQ(r.state.steps_done, eager.state.steps_done);
  EXPECT_EQ(r.state.rng.offset, eager.state.rng.offset);
  EXPECT_EQ(r.stats.graphs_live, graphs);
  EXPECT_GT(r.stats.replays, 0u);
  // Graphs add only their own instantiation memory: no activation copies (static arena).
  ASSERT_GE(r.graph_memory, 0);
  EXPECT_LT(static_cast<double>(r.graph_memory), 0.01 * static_cast<double>(r.arena_bytes) + (4 << 20))
      << "graphs took " << r.graph_memory << " bytes for an arena of " << r.arena_bytes;
  std::printf("%-32s losses and final state bitwise equal to eager; %d graphs, %llu replays, graph memory %lld B\n",
              name, r.stats.graphs_live, static_cast<unsigned long long>(r.stats.replays),
              static_cast<long long>(r.graph_memory));
}

// Losses at every step, and the final fp32 weights and Adam moments, bit for bit.
void expect_bitwise_same_training(const RunResult& r, const RunResult& reference, const char* reference_name) {
  ASSERT_EQ(r.losses.size(), reference.losses.size());
  for (size_t i = 0; i < r.losses.size(); ++i) {
    EXPECT_EQ(std::memcmp(&r.losses[i], &reference.losses[i], 4), 0)
        << "step " << i + 1 << ": loss " << r.losses[i] << " vs " << reference_name << " " << reference.losses[i];
  }
  EXPECT_TRUE(bitwise_equal(r.state.main_weights, reference.state.main_weights)) << "final fp32 weights differ";
  EXPECT_TRUE(bitwise_equal(r.state.exp_avg, reference.state.exp_avg)) << "final exp_avg differs";
  EXPECT_TRUE(bitwise_equal(r.state.exp_avg_sq, reference.state.exp_avg_sq)) << "final exp_avg_sq differs";
}

class GraphModesGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda::device_count() == 0) GTEST_SKIP() << "no GPU";
  }
};

TEST_F(GraphModesGpu, EveryModeIsBitwiseEqualToEager) {
  const RunResult eager = run_mode(tiny_with({"model.cuda_graph_impl=none"}));
  ASSERT_EQ(eager.losses.size(), static_cast<size_t>(kSteps));
  EXPECT_EQ(eager.stats.graphs_created, 0);
  EXPECT_LT(eager.losses.back(), eager.losses.front());  // it trains

  // 4 attention and 4 MLP layers; per graphed layer a forward graph and two backward ones (the first
  // microbatch's overwrites its gradients: graph/region.h).
  const std::vector<Mode> modes = {
      {"local", {"model.cuda_graph_impl=local"}, 1},
      {"transformer_engine attn", {"model.cuda_graph_impl=transformer_engine", "model.cuda_graph_scope=attn"}, 12},
      {"transformer_engine mlp", {"model.cuda_graph_impl=transformer_engine", "model.cuda_graph_scope=mlp"}, 12},
      {"transformer_engine attn,mlp",
       {"model.cuda_graph_impl=transformer_engine", "model.cuda_graph_scope=attn,mlp"}, 24},
  };
  for (const Mode& mode : modes) {
    SCOPED_TRACE(mode.name);
    expect_mode_bitwise_equal_to_eager(mode.name.c_str(), run_mode(tiny_with(mode.overrides)), eager, mode.graphs);
  }
}

// The tiny model with `variant`'s keys in every graph mode and under core_attn and full recompute, each bit for bit
// what eager gives; with `mlp_too` (a variant of the MLP as well) the MLP graphed and recomputed too.
void expect_attention_variant_bitwise_equal_to_eager(const std::vector<std::string>& variant, bool mlp_too = false) {
  const auto with = [&](std::vector<std::string> more) {
    more.insert(more.begin(), variant.begin(), variant.end());
    return tiny_with(more);
  };
  const RunResult eager = run_mode(with({"model.cuda_graph_impl=none"}));
  EXPECT_LT(eager.losses.back(), eager.losses.front());  // it trains
  const std::string scope = mlp_too ? "attn,mlp" : "attn", modules = mlp_too ? "core_attn,mlp" : "core_attn";
  const std::vector<Mode> modes = {
      {"local", {"model.cuda_graph_impl=local"}, 1},
      {"transformer_engine " + scope,
       {"model.cuda_graph_impl=transformer_engine", "model.cuda_graph_scope=" + scope},
       mlp_too ? 24 : 12},
      {"local, selective " + modules,
       {"model.cuda_graph_impl=local", "model.recompute_granularity=selective", "model.recompute_modules=" + modules},
       1},
      {"local, full recompute",
       {"model.cuda_graph_impl=local", "model.recompute_granularity=full", "model.recompute_method=uniform",
        "model.recompute_num_layers=1"},
       1},
  };
  for (const Mode& mode : modes) {
    SCOPED_TRACE(mode.name);
    expect_mode_bitwise_equal_to_eager(mode.name.c_str(), run_mode(with(mode.overrides)), eager, mode.graphs);
  }
}

// Qwen3's query and key norms (model.qk_layernorm): the norms' partial-row weight gradients, the projection they
// keep and the value copy replay bit for bit.
TEST_F(GraphModesGpu, QkLayernormEveryModeAndRecomputeIsBitwiseEqualToEager) {
  expect_attention_variant_bitwise_equal_to_eager({"model.qk_layernorm=true"});
}

// Partial rotary (model.rotary_percent, Phi-4-mini's 0.75): RoPE on the first dimensions of each head, from the
// cos/sin table of those dimensions, replays bit for bit.
TEST_F(GraphModesGpu, PartialRotaryEveryModeAndRecomputeIsBitwiseEqualToEager) {
  expect_attention_variant_bitwise_equal_to_eager({"model.rotary_percent=0.75"});
}

// LongRoPE (model.longrope_*, Phi-4-mini's on its 0.75 of each head): the cos/sin table of the factors and the
// attention factor replays bit for bit.
TEST_F(GraphModesGpu, LongRopeEveryModeAndRecomputeIsBitwiseEqualToEager) {
  std::string short_list = "1", long_list = "1";
  for (int i = 1; i < 24; ++i) {
    short_list += strprintf(",%g", 1.0 + 0.05 * i);
    long_list += strprintf(",%g", 1.0 + 1.5 * i);
  }
  expect_attention_variant_bitwise_equal_to_eager(
      {"model.rotary_percent=0.75", "model.longrope_short_factor=" + short_list,
       "model.longrope_long_factor=" + long_list, "model.longrope_attention_factor=1.19"});
}

// Qwen2's QKV bias (model.add_qkv_bias): the GEMM's bias epilogue and the bias gradient's partial rows replay bit for
// bit.
TEST_F(GraphModesGpu, QkvBiasEveryModeAndRecomputeIsBitwiseEqualToEager) {
  expect_attention_variant_bitwise_equal_to_eager({"model.add_qkv_bias=true"});
}

// Every linear's bias (model.add_bias_linear): the bias epilogues of the attention's and the MLP's GEMMs and the
// biases' gradient partial rows replay bit for bit, the MLP graphed and recomputed too.
TEST_F(GraphModesGpu, LinearBiasesEveryModeAndRecomputeIsBitwiseEqualToEager) {
  expect_attention_variant_bitwise_equal_to_eager({"model.add_bias_linear=true"}, /*mlp_too=*/true);
}

// A resumed run warms up again before it captures: resumed at step 23 with 2 warmup steps, it captures in
// step 26. The capture notice names that step (it once counted the steps this process ran: "at step 3").
TEST_F(GraphModesGpu, ACaptureAfterAResumeIsNamedByTheRunsStep) {
  const config::Config config = tiny_with({"model.cuda_graph_impl=local"});
  const model::ModelSpec model = config::model_spec(config);
  const model::BatchSpec batch = config::batch_spec(config);
  GpuBackend backend(config, model, batch, optimizer_spec(config), {static_cast<uint64_t>(config.rng.seed), 0});
  TrainingState resumed = backend.state();
  resumed.steps_done = 23;
  backend.load_state(resumed);
  std::vector<std::string> notices;
  backend.notify = [&notices](const std::string& line) {
    if (line.rfind("captured", 0) == 0) notices.push_back(line);
  };
  sg::test::LoaderBatches batches(sg::test::mock_data_options(config, model), model, batch);
  std::vector<int64_t> capture_steps;
  for (int i = 0; i < 4; ++i) {
    backend.submit(batches.next());
    for (const StepResult& r : backend.collect(0)) {
      if (r.capture_step) capture_steps.push_back(r.step);
    }
  }
  EXPECT_EQ(capture_steps, std::vector<int64_t>{26});
  ASSERT_EQ(notices.size(), 1u);
  EXPECT_EQ(notices[0].rfind("captured 1 CUDA graph at step 26:", 0), 0u) << notices[0];
}

// Issue 12: the hybrid pattern M*-M*-M- (Mamba, attention without RoPE, squared-ReLU MLP) with dropout 0.1
// and two microbatches, 30 steps: eager, the whole step as one graph, and the mamba scope mixed with the
// attn and mlp scopes give bitwise identical losses, weights and moments.
TEST_F(GraphModesGpu, HybridMambaPatternEveryModeIsBitwiseEqualToEager) {
  const std::vector<std::string> hybrid = {"model.hybrid_override_pattern=M*-M*-M-", "model.num_layers=8"};
  auto with = [&](std::vector<std::string> mode) {
    mode.insert(mode.begin(), hybrid.begin(), hybrid.end());
    return recipe_with("hybrid/tiny_hybrid", mode);
  };
  const RunResult eager = run_mode(with({"model.cuda_graph_impl=none"}));
  ASSERT_EQ(eager.losses.size(), static_cast<size_t>(kSteps));
  // It trains: the mock tokens are close to uniform, so 30 steps need not lower the loss (9.053 -> 9.062 on
  // the H200); every loss is finite and they change.
  for (const float loss : eager.losses) EXPECT_TRUE(std::isfinite(loss)) << loss;
  EXPECT_NE(eager.losses.back(), eager.losses.front());
  // M*-M*-M-: 3 Mamba, 2 attention, 3 MLP layers; a region graph per layer, module and phase, and one
  // more per backward region for the first microbatch.
  const std::vector<Mode> modes = {
      {"local", {"model.cuda_graph_impl=local"}, 1},
      {"transformer_engine mamba", {"model.cuda_graph_impl=transformer_engine", "model.cuda_graph_scope=mamba"}, 9},
      {"transformer_engine attn,mamba",
       {"model.cuda_graph_impl=transformer_engine", "model.cuda_graph_scope=attn,mamba"}, 15},
      {"transformer_engine mamba,mlp",
       {"model.cuda_graph_impl=transformer_engine", "model.cuda_graph_scope=mamba,mlp"}, 18},
  };
  for (const Mode& mode : modes) {
    SCOPED_TRACE(mode.name);
    expect_mode_bitwise_equal_to_eager(mode.name.c_str(), run_mode(with(mode.overrides)), eager, mode.graphs);
  }
}

// llama/tiny is 4 GPT blocks; the hybrid pattern "*-" x 4 (typed unquoted, as Megatron users do) is
// the same 8 layers. From the same initial weights (the inits differ: Megatron scales output
// projections by 1/sqrt(2 num_layers)), with dropout and two microbatches, every graph mode of the
// hybrid spelling gives the GPT spelling's eager losses, weights and moments bit for bit.
TEST_F(GraphModesGpu, HybridStarDashPatternTrainsBitwiseLikeGptBlocks) {
  const config::Config gpt_config = tiny_with({"model.cuda_graph_impl=none"});
  const std::vector<float> initial =
      model::initial_parameters(model::model_layout(config::model_spec(gpt_config)),
                                 static_cast<uint64_t>(gpt_config.rng.seed));
  const RunResult gpt = run_mode(gpt_config, &initial);
  ASSERT_EQ(gpt.losses.size(), static_cast<size_t>(kSteps));
  // RoPE as the GPT blocks have it (a hybrid pattern's default is none, as in Megatron).
  const std::vector<std::string> hybrid = {"model.hybrid_override_pattern=*-*-*-*-", "model.num_layers=8",
                                           "model.position_embedding_type=rope"};
  for (const std::vector<std::string>& mode :
       {std::vector<std::string>{"model.cuda_graph_impl=none"}, std::vector<std::string>{"model.cuda_graph_impl=local"},
        std::vector<std::string>{"model.cuda_graph_impl=transformer_engine", "model.cuda_graph_scope=attn,mlp"}}) {
    SCOPED_TRACE(mode.front());
    std::vector<std::string> overrides = hybrid;
    overrides.insert(overrides.end(), mode.begin(), mode.end());
    expect_bitwise_same_training(run_mode(tiny_with(overrides), &initial), gpt, "GPT blocks");
  }
}

// Issue 15: activation recompute changes the memory plan and the backward's work, never the numbers.
// With dropout on (the recompute must draw the forward's masks: hidden dropout from the device Philox
// state, attention dropout from the cuDNN seeds written once per microbatch) and two microbatches, every
// recompute setting in every graph mode the rules allow (full: none and local; selective: every mode,
// recomputed modules graphed too — rule 13 is a note) trains bitwise like eager without recompute, and
// plans fewer activation bytes.
TEST_F(GraphModesGpu, EveryRecomputeSettingInEveryAllowedModeIsBitwiseEqualToEager) {
  const RunResult eager = run_mode(tiny_with({"model.cuda_graph_impl=none"}));
  ASSERT_EQ(eager.losses.size(), static_cast<size_t>(kSteps));
  const std::vector<std::string> none = {"model.cuda_graph_impl=none"};
  const std::vector<std::string> local = {"model.cuda_graph_impl=local"};
  const std::vector<std::string> te_attn = {"model.cuda_graph_impl=transformer_engine", "model.cuda_graph_scope=attn"};
  const std::vector<std::string> te_mlp = {"model.cuda_graph_impl=transformer_engine", "model.cuda_graph_scope=mlp"};
  const std::vector<std::string> te_both = {"model.cuda_graph_impl=transformer_engine",
                                            "model.cuda_graph_scope=attn,mlp"};
  const std::vector<std::string> sel_all = {"model.recompute_granularity=selective",
                                            "model.recompute_modules=core_attn,mlp,layernorm"};
  const std::vector<std::string> sel_attn = {"model.recompute_granularity=selective", "model.recompute_modules=core_attn"};
  const std::vector<std::string> sel_mlp = {"model.recompute_granularity=selective", "model.recompute_modules=mlp"};
  const std::vector<std::string> full_uniform1 = {"model.recompute_granularity=full", "model.recompute_method=uniform",
                                                  "model.recompute_num_layers=1"};
  const std::vector<std::string> full_uniform2 = {"model.recompute_granularity=full", "model.recompute_method=uniform",
                                                  "model.recompute_num_layers=2"};
  const std::vector<std::string> full_block3 = {"model.recompute_granularity=full", "model.recompute_method=block",
                                                "model.recompute_num_layers=3"};
  struct Case {
    std::vector<std::string> mode, recompute;
  };
  const std::vector<Case> cases = {
      {none, sel_all},      {none, full_uniform1}, {none, full_uniform2}, {none, full_block3},
      {local, sel_all},     {local, sel_attn},     {local, full_uniform1}, {local, full_block3},
      {te_attn, sel_attn},  {te_mlp, sel_mlp},     {te_both, sel_all},    {te_attn, sel_all},
  };
  for (const Case& c : cases) {
    std::vector<std::string> overrides = c.mode;
    overrides.insert(overrides.end(), c.recompute.begin(), c.recompute.end());
    std::string name;
    for (const std::string& o : overrides) name += o + " ";
    SCOPED_TRACE(name);
    const RunResult r = run_mode(tiny_with(overrides));
    expect_bitwise_same_training(r, eager, "eager without recompute");
    EXPECT_EQ(r.state.rng.offset, eager.state.rng.offset);
    if (c.recompute == full_uniform2) {
      // tiny's 4 blocks in 2 chunks of 2: full groups alternate between two buffers (model/recompute_layout.h),
      // which here hold both chunks: no saving, and never more.
      EXPECT_LE(r.arena_bytes, eager.arena_bytes);
    } else {
      EXPECT_LT(r.arena_bytes, eager.arena_bytes) << "recompute should plan fewer activation bytes";
    }
    if (c.mode != none) {
      EXPECT_GT(r.stats.replays, 0u);
    }
    std::printf("%-100s bitwise equal to eager; arena %zu B vs %zu B\n", name.c_str(), r.arena_bytes,
                eager.arena_bytes);
  }
}

// The MLP's fused SwiGLU backward GEMM (kernels/swiglu_backward_gemm.h; forced, tiny is below its rule) under
// recompute: it reads the recomputed gate_up, and every setting trains bitwise like eager without recompute on
// the same kernels.
TEST_F(GraphModesGpu, FusedSwiGluBackwardUnderRecomputeIsBitwiseEqualToEager) {
  const test::ScopedEnv fused("STEPGRAPH_SWIGLU_BACKWARD_GEMM", "always");
  const RunResult eager = run_mode(tiny_with({"model.cuda_graph_impl=none"}));
  const std::vector<std::vector<std::string>> cases = {
      {"model.cuda_graph_impl=none", "model.recompute_granularity=selective", "model.recompute_modules=mlp"},
      {"model.cuda_graph_impl=local", "model.recompute_granularity=full", "model.recompute_method=uniform",
       "model.recompute_num_layers=1"},
      {"model.cuda_graph_impl=transformer_engine", "model.cuda_graph_scope=mlp",
       "model.recompute_granularity=selective", "model.recompute_modules=mlp"},
  };
  for (const auto& overrides : cases) {
    SCOPED_TRACE(overrides[0] + " " + overrides[1]);
    expect_bitwise_same_training(run_mode(tiny_with(overrides)), eager, "eager without recompute");
  }
}

// lr = 1e30: the first update blows the weights up, so a later step's loss and gradients are not
// finite. The error must name the first step whose flag was set — the first step the metrics file
// does not have — and the check.
void expect_nan_stop(const std::vector<std::string>& mode, const std::vector<std::string>& checks,
                     const std::string& expected_check) {
  static int run = 0;
  std::vector<std::string> overrides = mode;
  overrides.insert(overrides.end(), checks.begin(), checks.end());
  overrides.push_back("optimizer.lr=1e30");
  overrides.push_back("scheduler.lr_warmup_iters=0");
  overrides.push_back("train.train_iters=8");
  const config::Config config = tiny_with(overrides);
  TrainOptions options;
  options.run_dir = ::testing::TempDir() + "/nan_run_" + std::to_string(run++);
  try {
    train(config, options);
    FAIL() << "training with lr=1e30 did not stop";
  } catch (const Error& e) {
    const std::string what = e.what();
    std::ifstream metrics(options.run_dir + "/metrics.jsonl");
    int64_t logged = 0;
    for (std::string line; std::getline(metrics, line);) ++logged;
    EXPECT_GE(logged, 1);  // step 1 (before the blow-up) was fine
    EXPECT_LT(logged, 8);
    EXPECT_EQ(what.rfind("step " + std::to_string(logged + 1) + ":", 0), 0u) << what;
    EXPECT_NE(what.find(expected_check), std::string::npos) << what;
  }
}

TEST_F(GraphModesGpu, NanInLossStopsTheRunInEagerAndScopedModes) {
  for (const auto& mode : std::vector<std::vector<std::string>>{
           {"model.cuda_graph_impl=none"},
           {"model.cuda_graph_impl=transformer_engine", "model.cuda_graph_scope=attn,mlp",
            "model.cuda_graph_warmup_steps=0"}}) {
    SCOPED_TRACE(mode[0]);
    expect_nan_stop(mode, {"rerun_state_machine.check_for_nan_in_loss=true", "ddp.check_for_nan_in_grad=false"},
                    "check_for_nan_in_loss");
    expect_nan_stop(mode, {"rerun_state_machine.check_for_nan_in_loss=false", "ddp.check_for_nan_in_grad=true"},
                    "check_for_nan_in_grad");
  }
}

}  // namespace
}  // namespace sg::train
