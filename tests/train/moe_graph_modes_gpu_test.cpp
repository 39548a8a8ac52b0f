// Issue 11 acceptance: an MoE model (moe/tiny_moe: 4 GPT blocks of attention + an 8-expert top-2 MoE)
// trains to BITWISE identical losses, auxiliary losses, final weights and Adam moments under
// cuda_graph_impl none, local (the whole step one graph) and transformer_engine with
// attn,moe_router,moe_preprocess (Megatron's dropless setting) and attn,moe (the whole MoE layer graphed:
// beyond Megatron for dropless routing) — with dropout 0.1 and two microbatches, for dropless routing,
// token drop (capacity 1.0 padded, drop by probs) and sigmoid routing with the aux-loss-free expert
// bias and token drop by position (packed); and hybrid/tiny_hybrid_moe (Mamba, MoE with
// squared-ReLU experts and a shared expert, sigmoid routing with the bias, one attention layer), and tiny_moe with
// a gated shared expert (moe_shared_expert_gate) and with every linear's bias (add_bias_linear, the experts' too). The graphs take only their instantiation memory.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
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

struct Routing {
  const char* name;
  std::vector<std::string> overrides;
  const char* recipe = "moe/tiny_moe";
  int attention_layers = 4, moe_layers = 4;  // the recipe's (the graphed modules' layers)
};

const Routing kRoutings[] = {
    {"dropless", {"model.moe_z_loss_coeff=1e-3"}},
    {"token_drop_probs_padded",
     {"model.moe_expert_capacity_factor=1.0", "model.moe_pad_expert_input_to_capacity=true",
      "model.moe_z_loss_coeff=1e-3"}},
    {"sigmoid_bias_drop_position",
     {"model.moe_router_score_function=sigmoid", "model.moe_router_enable_expert_bias=true",
      "model.moe_router_bias_update_rate=1e-2", "model.moe_router_topk_scaling_factor=2.5",
      "model.moe_expert_capacity_factor=1.25", "model.moe_token_drop_policy=position",
      "model.moe_router_load_balancing_type=seq_aux_loss"}},
    {"nemotron3_squared_relu_experts", {"model.moe_z_loss_coeff=1e-3"}, "hybrid/tiny_hybrid_moe", 1, 3},
    // Qwen2-MoE's gated shared expert: the gate's output stage, its saved ungated output and its gradients.
    {"shared_expert_gate", {"model.moe_shared_expert_intermediate_size=96", "model.moe_shared_expert_gate=true"}},
    // add_bias_linear: every linear's bias, the experts' included (their sums into the gradients, no atomics), with
    // token drop padded to capacity.
    {"linear_biases_padded",
     {"model.add_bias_linear=true", "model.moe_expert_capacity_factor=1.0", "model.moe_pad_expert_input_to_capacity=true"}},
};

class MoeGraphModesGpu : public ::testing::TestWithParam<Routing> {
 protected:
  void SetUp() override {
    if (cuda::device_count() == 0) GTEST_SKIP() << "no GPU";
  }
};

TEST_P(MoeGraphModesGpu, EveryModeIsBitwiseEqualToEager) {
  const Routing& routing = GetParam();
  const auto config = [&](const std::vector<std::string>& mode) {
    std::vector<std::string> overrides = routing.overrides;
    overrides.insert(overrides.end(), mode.begin(), mode.end());
    return graph_runs::recipe_with(routing.recipe, overrides);
  };
  const RunResult eager = run_mode(config({"model.cuda_graph_impl=none"}));
  ASSERT_EQ(eager.losses.size(), static_cast<size_t>(kSteps));
  EXPECT_EQ(eager.stats.graphs_created, 0);
  // It trains: the mock tokens are close to uniform, so 30 steps need not lower the loss (dropless went
  // 9.057 -> 9.067 on the H200); every loss is finite, they change, and Adam's moments moved.
  for (const float loss : eager.losses) EXPECT_TRUE(std::isfinite(loss)) << loss;
  EXPECT_NE(eager.losses.back(), eager.losses.front());
  const auto moved = std::count_if(eager.state.exp_avg.begin(), eager.state.exp_avg.end(),
                                   [](float m) { return m != 0.0f; });
  EXPECT_GT(moved, static_cast<long>(eager.state.exp_avg.size() / 2)) << "of " << eager.state.exp_avg.size();
  EXPECT_GT(eager.aux_losses.front(), 0.0f) << "the aux loss is computed";

  struct Mode {
    const char* name;
    std::vector<std::string> overrides;
    int graphs;  // per graphed module: forward, backward and first-microbatch backward regions
  };
  const int attn = routing.attention_layers, moe = routing.moe_layers;
  const std::vector<Mode> modes = {
      {"local", {"model.cuda_graph_impl=local"}, 1},
      {"transformer_engine attn,moe_router,moe_preprocess",
       {"model.cuda_graph_impl=transformer_engine", "model.cuda_graph_scope=attn,moe_router,moe_preprocess"},
       attn * 3 + moe * 2 * 3},
      {"transformer_engine attn,moe",
       {"model.cuda_graph_impl=transformer_engine", "model.cuda_graph_scope=attn,moe"}, attn * 3 + moe * 3 * 3},
  };
  for (const Mode& mode : modes) {
    SCOPED_TRACE(std::string(routing.name) + " / " + mode.name);
    const RunResult r = run_mode(config(mode.overrides));
    graph_runs::expect_bitwise_same_run(r, eager, "eager");
    EXPECT_EQ(r.stats.graphs_live, mode.graphs);
    EXPECT_GT(r.stats.replays, 0u);
    ASSERT_GE(r.graph_memory, 0);
    EXPECT_LT(static_cast<double>(r.graph_memory), 0.01 * static_cast<double>(r.arena_bytes) + (4 << 20))
        << "graphs took " << r.graph_memory << " bytes for an arena of " << r.arena_bytes;
    std::printf("%-28s %-52s bitwise equal to eager; %d graphs, %llu replays, graph memory %lld B; loss %.4f -> "
                "%.4f, aux %.5f\n",
                routing.name, mode.name, r.stats.graphs_live, static_cast<unsigned long long>(r.stats.replays),
                static_cast<long long>(r.graph_memory), r.losses.front(), r.losses.back(), r.aux_losses.back());
  }
}

INSTANTIATE_TEST_SUITE_P(Routings, MoeGraphModesGpu, ::testing::ValuesIn(kRoutings),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace sg::train
