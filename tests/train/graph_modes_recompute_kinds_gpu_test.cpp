// Issue 15 for the MoE and Mamba layer kinds (the sibling of graph_modes_gpu_test.cpp's
// EveryRecomputeSettingInEveryAllowedModeIsBitwiseEqualToEager): every recompute module these kinds
// declare (moe_act, moe, shared_experts; mamba) and full recompute over MoE and hybrid stacks, in every
// graph mode the rules allow — full: none and local; selective: none, local and the transformer_engine
// scopes, the recomputed modules graphed too, except moe with a graphed moe_router (rule 12) — train
// bitwise like eager without recompute: every loss, auxiliary loss and z-loss, the final weights and
// Adam moments; with dropout 0.1 and two microbatches. Selective recompute plans fewer activation bytes.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "cuda/device.h"
#include "graph_mode_runs.h"

namespace sg::train {
namespace {

using graph_runs::kSteps;
using graph_runs::run_mode;
using graph_runs::RunResult;
using Overrides = std::vector<std::string>;

const Overrides kNone = {"model.cuda_graph_impl=none"};
const Overrides kLocal = {"model.cuda_graph_impl=local"};

Overrides scoped(const std::string& scope) {
  return {"model.cuda_graph_impl=transformer_engine", "model.cuda_graph_scope=" + scope};
}
Overrides selective(const std::string& modules) {
  return {"model.recompute_granularity=selective", "model.recompute_modules=[" + modules + "]"};
}
Overrides full(const std::string& method, int layers) {
  return {"model.recompute_granularity=full", "model.recompute_method=" + method,
          "model.recompute_num_layers=" + std::to_string(layers)};
}

struct Case {
  Overrides mode, recompute;
};

// `recipe` with `model` (the model's overrides) and then each case's; every case against the eager run
// without recompute.
void expect_cases_bitwise_equal_to_eager(const std::string& recipe, const Overrides& model,
                                         const std::vector<Case>& cases) {
  const auto config = [&](const Overrides& mode) {
    Overrides o = model;
    o.insert(o.end(), mode.begin(), mode.end());
    return graph_runs::recipe_with(recipe, o);
  };
  const RunResult eager = run_mode(config(kNone));
  ASSERT_EQ(eager.losses.size(), static_cast<size_t>(kSteps));
  for (const Case& c : cases) {
    Overrides overrides = c.mode;
    overrides.insert(overrides.end(), c.recompute.begin(), c.recompute.end());
    std::string name;
    for (const std::string& o : overrides) name += o + " ";
    SCOPED_TRACE(name);
    const RunResult r = run_mode(config(overrides));
    graph_runs::expect_bitwise_same_run(r, eager, "eager without recompute");
    if (c.recompute.front() == "model.recompute_granularity=selective") {
      EXPECT_LT(r.arena_bytes, eager.arena_bytes) << "recompute should plan fewer activation bytes";
    } else {
      EXPECT_LE(r.arena_bytes, eager.arena_bytes);  // two full-chunk buffers may hold as much as they save
    }
    if (c.mode != kNone) {
      EXPECT_GT(r.stats.replays, 0u);
    }
    std::printf("%-120s bitwise equal to eager; arena %zu B vs %zu B\n", name.c_str(), r.arena_bytes,
                eager.arena_bytes);
  }
}

class GraphModesRecomputeGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda::device_count() == 0) GTEST_SKIP() << "no GPU";
  }
};

// moe/tiny_moe (4 GPT blocks of attention + 8-expert top-2 dropless MoE) with a shared expert and the
// z-loss on top of the aux loss.
TEST_F(GraphModesRecomputeGpu, MoeModulesInEveryAllowedModeAreBitwiseEqualToEager) {
  expect_cases_bitwise_equal_to_eager(
      "moe/tiny_moe", {"model.moe_shared_expert_intermediate_size=256", "model.moe_z_loss_coeff=1e-3"},
      {
          {kNone, selective("moe_act")},
          {kNone, selective("moe")},
          {kNone, selective("shared_experts")},
          {kNone, selective("core_attn,moe,layernorm")},
          {kNone, full("uniform", 1)},
          {kNone, full("block", 2)},
          {kLocal, selective("moe_act,shared_experts")},
          {kLocal, selective("moe")},
          {kLocal, full("uniform", 2)},
          {scoped("attn,moe_router,moe_preprocess"), selective("moe_act")},
          {scoped("attn,moe_router,moe_preprocess"), selective("core_attn,moe_act,shared_experts")},
          {scoped("attn,moe"), selective("moe")},
          {scoped("attn,moe"), selective("moe_act")},
          {scoped("attn,moe"), selective("core_attn,moe,shared_experts,layernorm")},
      });
}

// Token drop by position with sigmoid routing and the aux-loss-free expert bias: the bias moves by the
// step's token counts, so a recompute that counted again would change the weights.
TEST_F(GraphModesRecomputeGpu, MoeWithExpertBiasAndTokenDropIsBitwiseEqualToEager) {
  expect_cases_bitwise_equal_to_eager(
      "moe/tiny_moe",
      {"model.moe_router_score_function=sigmoid", "model.moe_router_enable_expert_bias=true",
       "model.moe_router_bias_update_rate=1e-2", "model.moe_expert_capacity_factor=1.25",
       "model.moe_token_drop_policy=position", "model.moe_router_load_balancing_type=seq_aux_loss"},
      {
          {kNone, selective("moe")},
          {kLocal, selective("moe_act")},
          {kLocal, full("uniform", 1)},
          {scoped("attn,moe"), selective("moe")},
      });
}

// hybrid/tiny_hybrid's layers M*-M*-M- (Mamba, attention without RoPE, squared-ReLU MLP).
TEST_F(GraphModesRecomputeGpu, HybridMambaModulesInEveryAllowedModeAreBitwiseEqualToEager) {
  expect_cases_bitwise_equal_to_eager("hybrid/tiny_hybrid",
                                      {"model.hybrid_override_pattern=M*-M*-M-", "model.num_layers=8"},
                                      {
                                          {kNone, selective("mamba")},
                                          {kNone, selective("mamba,core_attn,mlp,layernorm")},
                                          {kNone, full("uniform", 1)},
                                          {kNone, full("uniform", 3)},
                                          {kNone, full("block", 2)},
                                          {kLocal, selective("mamba")},
                                          {kLocal, full("uniform", 1)},
                                          {scoped("mamba"), selective("mamba")},
                                          {scoped("attn,mamba,mlp"), selective("mamba,core_attn,mlp")},
                                      });
}

// A hybrid stack with every layer kind, M*EM*-ME (tiny_hybrid's Mamba and attention, tiny_moe's experts; SwiGLU
// for the dense MLP too, as the experts compute and validation requires).
TEST_F(GraphModesRecomputeGpu, HybridMambaMoeStackIsBitwiseEqualToEager) {
  expect_cases_bitwise_equal_to_eager(
      "hybrid/tiny_hybrid",
      {"model.hybrid_override_pattern=M*EM*-ME", "model.num_layers=8", "model.activation_func=silu",
       "model.gated_linear_unit=true", "model.num_moe_experts=8",
       "model.moe_router_topk=2", "model.moe_ffn_hidden_size=256", "model.moe_aux_loss_coeff=1e-2",
       "model.moe_token_dispatcher_type=alltoall"},
      {
          {kNone, selective("mamba,moe")},
          {kNone, full("uniform", 2)},
          {kLocal, selective("mamba,moe_act,core_attn,layernorm")},
          {kLocal, full("uniform", 1)},
          {scoped("attn,mamba,moe"), selective("mamba,moe,mlp")},
      });
}

}  // namespace
}  // namespace sg::train
