// `stepgraph train` with a hybrid Mamba pattern on the CPU backend (issue 12): the loss falls, resume is
// bitwise exact, and the checkpoint is a NemotronH folder (config.json with the pattern and the Mamba
// shapes; the mixers' tensors under their Hugging Face names). With MoE layers in Nemotron-H's style
// (squared-ReLU experts, sigmoid routing, a shared expert) the folder is a NemotronH MoE one.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "checkpoint/safetensors.h"
#include "train_cli_fixture.h"

namespace {

using namespace sg::test::train_cli;

// The CPU fixture's tiny model as M*-M in Nemotron-H's style, with a small mixer: 2 heads of 64 (d_inner 128;
// 64 is the head dim the GPU's SSD scan is built for, which validation asks of every run), 2 groups of state 16.
std::vector<std::string> hybrid(std::vector<std::string> extra) {
  std::vector<std::string> args = {"model.hybrid_override_pattern=M*-M", "model.num_layers=4",
                                   "scheduler.lr_decay_iters=60",  // one schedule for every run length
                                   "model.activation_func=squared_relu", "model.gated_linear_unit=false",
                                   "model.mamba_head_dim=64", "model.mamba_num_groups=2",
                                   "model.mamba_state_dim=16"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

TEST_F(TrainerCliTest, HybridMambaPatternTrainsAndSavesANemotronHCheckpoint) {
  constexpr int kIters = 60;
  const RunResult r = train(hybrid({"train.train_iters=" + std::to_string(kIters), "checkpoint.save=" + path("ckpt"),
                                    "checkpoint.save_interval=30", "--run-dir", path("run")}),
                            "train");
  ASSERT_EQ(r.rc, 0) << r.all();
  EXPECT_NE(r.err.find("4 layers: M*-M (hybrid pattern)"), std::string::npos) << r.err;
  const auto metrics = read_metrics(path("run") + "/metrics.jsonl");
  ASSERT_EQ(metrics.size(), static_cast<size_t>(kIters));
  double last5 = 0.0;
  for (int i = kIters - 5; i < kIters; ++i) last5 += metrics[static_cast<size_t>(i)].loss / 5.0;
  EXPECT_LT(last5, 0.85 * metrics.front().loss) << "the hybrid model does not learn";

  const std::string folder = path("ckpt") + "/iter_0000060";
  const nlohmann::json config = nlohmann::json::parse(read_file(folder + "/config.json"));
  EXPECT_EQ(config["architectures"][0], "NemotronHForCausalLM");
  EXPECT_EQ(config["model_type"], "nemotron_h");
  EXPECT_EQ(config["hybrid_override_pattern"], "M*-M");
  EXPECT_EQ(config["mamba_num_heads"], 2);  // 2 x 64 / 64
  EXPECT_EQ(config["mamba_head_dim"], 64);
  EXPECT_EQ(config["n_groups"], 2);
  EXPECT_EQ(config["ssm_state_size"], 16);
  EXPECT_EQ(config["mlp_hidden_act"], "relu2");
  EXPECT_EQ(config["intermediate_size"], 128);
  EXPECT_FALSE(config.contains("time_step_limit"));  // transformers' default (0, inf)

  const SafetensorsFile weights(folder + "/model.safetensors");
  struct Expected {
    const char* name;
    std::vector<int64_t> shape;
  };
  for (const Expected& e : std::vector<Expected>{{"backbone.embeddings.weight", {256, 64}},
                                                 {"backbone.layers.0.norm.weight", {64}},
                                                 {"backbone.layers.0.mixer.in_proj.weight", {2 * 128 + 64 + 2, 64}},
                                                 {"backbone.layers.0.mixer.conv1d.weight", {128 + 64, 1, 4}},
                                                 {"backbone.layers.0.mixer.conv1d.bias", {128 + 64}},
                                                 {"backbone.layers.0.mixer.dt_bias", {2}},
                                                 {"backbone.layers.0.mixer.A_log", {2}},
                                                 {"backbone.layers.0.mixer.D", {2}},
                                                 {"backbone.layers.0.mixer.norm.weight", {128}},
                                                 {"backbone.layers.0.mixer.out_proj.weight", {64, 128}},
                                                 {"backbone.layers.1.mixer.q_proj.weight", {64, 64}},
                                                 {"backbone.layers.2.mixer.up_proj.weight", {128, 64}},
                                                 {"backbone.layers.2.mixer.down_proj.weight", {64, 128}},
                                                 {"backbone.norm_f.weight", {64}},
                                                 {"lm_head.weight", {256, 64}}}) {
    const SafetensorsFile::Entry* t = weights.find(e.name);
    ASSERT_NE(t, nullptr) << e.name;
    EXPECT_EQ(t->shape, e.shape) << e.name;
  }
  EXPECT_EQ(weights.find("backbone.layers.2.mixer.gate_proj.weight"), nullptr);

  // 30 steps, then a resume to 60, reach the straight run's step-60 loss bit for bit.
  const RunResult first = train(hybrid({"train.train_iters=30", "checkpoint.save=" + path("ckpt_30"), "--run-dir",
                                        path("run_30")}),
                                "first_half");
  ASSERT_EQ(first.rc, 0) << first.all();
  const RunResult resumed = train(hybrid({"train.train_iters=" + std::to_string(kIters),
                                          "checkpoint.load=" + path("ckpt_30"),
                                          "checkpoint.save=" + path("ckpt_resumed"), "--run-dir", path("run_resumed")}),
                                  "resumed");
  ASSERT_EQ(resumed.rc, 0) << resumed.all();
  const auto after = read_metrics(path("run_resumed") + "/metrics.jsonl");
  ASSERT_FALSE(after.empty());
  EXPECT_EQ(after.back().step, kIters);
  EXPECT_EQ(after.back().loss_text, metrics.back().loss_text) << "resumed hybrid run diverged";
}

// Nemotron 3's layer kinds: Mamba, MoE and attention. The routed experts, the shared expert and the router
// (with its correction bias) are saved under NemotronHForCausalLM's names, and config.json carries the routing.
TEST_F(TrainerCliTest, HybridMoePatternSavesANemotronHMoeCheckpoint) {
  const RunResult r = train(
      {"model.hybrid_override_pattern=ME*E", "model.num_layers=4", "model.activation_func=squared_relu",
       "model.gated_linear_unit=false", "model.mamba_head_dim=64", "model.mamba_num_groups=2",
       "model.mamba_state_dim=16", "model.num_moe_experts=4", "model.moe_router_topk=2",
       "model.moe_ffn_hidden_size=32", "model.moe_shared_expert_intermediate_size=48",
       "model.moe_router_score_function=sigmoid", "model.moe_router_topk_scaling_factor=2.5",
       "model.moe_router_enable_expert_bias=true", "model.moe_aux_loss_coeff=1e-3", "train.train_iters=4",
       "checkpoint.save=" + path("ckpt"), "--run-dir", path("run")},
      "train");
  ASSERT_EQ(r.rc, 0) << r.all();
  EXPECT_NE(r.err.find("4 layers: ME*E (hybrid pattern)"), std::string::npos) << r.err;
  const std::string folder = path("ckpt") + "/iter_0000004";
  const nlohmann::json config = nlohmann::json::parse(read_file(folder + "/config.json"));
  EXPECT_EQ(config["architectures"][0], "NemotronHForCausalLM");
  EXPECT_EQ(config["hybrid_override_pattern"], "ME*E");
  EXPECT_EQ(config["n_routed_experts"], 4);
  EXPECT_EQ(config["num_experts_per_tok"], 2);
  EXPECT_EQ(config["moe_intermediate_size"], 32);
  EXPECT_EQ(config["moe_shared_expert_intermediate_size"], 48);
  EXPECT_EQ(config["routed_scaling_factor"], 2.5);
  EXPECT_EQ(config["norm_topk_prob"], true);
  EXPECT_EQ(config["n_group"], 1);
  EXPECT_EQ(config["topk_group"], 1);

  const SafetensorsFile weights(folder + "/model.safetensors");
  struct Expected {
    const char* name;
    std::vector<int64_t> shape;
  };
  const std::vector<Expected> expected = {{"backbone.layers.1.mixer.gate.weight", {4, 64}},
                                          {"backbone.layers.1.mixer.gate.e_score_correction_bias", {4}},
                                          {"backbone.layers.1.mixer.experts.0.up_proj.weight", {32, 64}},
                                          {"backbone.layers.1.mixer.experts.3.down_proj.weight", {64, 32}},
                                          {"backbone.layers.3.mixer.shared_experts.up_proj.weight", {48, 64}},
                                          {"backbone.layers.3.mixer.shared_experts.down_proj.weight", {64, 48}}};
  for (const Expected& e : expected) {
    const SafetensorsFile::Entry* t = weights.find(e.name);
    ASSERT_NE(t, nullptr) << e.name;
    EXPECT_EQ(t->shape, e.shape) << e.name;
  }
  EXPECT_EQ(weights.find("backbone.layers.1.mixer.experts.0.w1.weight"), nullptr);
}

}  // namespace
