// `stepgraph train` of an MoE model end to end through the real binary on the CPU fp32 reference
// backend: the tiny model of the trainer CLI tests with its MLPs made Mixture-of-Experts (4 experts,
// top-2, aux loss and z-loss) trains below the corpus's unigram entropy, dropless and with token drop,
// and metrics.jsonl carries the auxiliary losses apart from the language-model loss.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "checkpoint/safetensors.h"
#include "train_cli_fixture.h"

namespace {

using namespace sg::test::train_cli;

const std::vector<std::string> kMoe = {"model.num_moe_experts=4",      "model.moe_router_topk=2",
                                       "model.moe_ffn_hidden_size=64", "model.moe_token_dispatcher_type=alltoall",
                                       "model.moe_aux_loss_coeff=0.01", "model.moe_z_loss_coeff=0.001"};

std::vector<std::string> with(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Every 10th step (llama/tiny's log interval) logs the kept tokens per expert of each MoE layer: 2
// layers x 4 experts, at most 8 sequences x 32 tokens x top-2 per layer (exactly that when dropless).
void expect_token_counts(const nlohmann::json& j, bool dropless) {
  ASSERT_TRUE(j.contains("moe_tokens_per_expert")) << j.dump();
  const auto& rows = j["moe_tokens_per_expert"];
  ASSERT_EQ(rows.size(), 2u) << j.dump();
  for (const auto& row : rows) {
    ASSERT_EQ(row.size(), 4u) << j.dump();
    int64_t sum = 0;
    for (const auto& n : row) sum += n.get<int64_t>();
    if (dropless) {
      EXPECT_EQ(sum, 8 * 32 * 2) << j.dump();
    } else {
      EXPECT_LE(sum, 8 * 32 * 2) << j.dump();
      EXPECT_GT(sum, 0) << j.dump();
    }
  }
}

void expect_trains(const RunResult& r, const std::string& metrics_path, int iters, double unigram_entropy,
                   bool dropless) {
  ASSERT_EQ(r.rc, 0) << r.all();
  EXPECT_NE(r.err.find("(*E)x2"), std::string::npos) << "the stack has MoE layers:\n" << r.err;
  const auto metrics = read_metrics(metrics_path);
  ASSERT_EQ(metrics.size(), static_cast<size_t>(iters)) << r.all();
  for (const auto& m : metrics) {
    const auto j = nlohmann::json::parse(m.raw);
    ASSERT_TRUE(j.contains("moe_aux_loss") && j.contains("moe_z_loss")) << m.raw;
    const double aux = j["moe_aux_loss"].get<double>(), z = j["moe_z_loss"].get<double>();
    // Two MoE layers, coefficient 0.01: the aux loss of each is about coeff at balance and grows with imbalance.
    EXPECT_GE(aux, 2 * 0.01 * 0.9) << m.raw;
    EXPECT_LT(aux, 2 * 0.01 * 4.0) << m.raw;
    EXPECT_GT(z, 0.0) << m.raw;
    if (m.step % 10 == 0) expect_token_counts(j, dropless);
  }
  double last5 = 0.0;
  for (int i = iters - 5; i < iters; ++i) last5 += metrics[static_cast<size_t>(i)].loss / 5.0;
  const double first = metrics.front().loss;
  EXPECT_NEAR(first, std::log(256.0), 0.5);
  EXPECT_LT(last5, unigram_entropy) << "first loss " << first;
  std::fprintf(stderr, "MoE loss %.4f -> %.4f (mean of the last 5); unigram entropy %.4f nats\n", first, last5,
               unigram_entropy);
}

TEST_F(TrainerCliTest, MoeTrainsOnTheCpuDropless) {
  constexpr int kIters = 150;
  const RunResult r = train(with(kMoe, {"train.train_iters=" + std::to_string(kIters), "train.global_batch_size=8",
                                        "--run-dir", path("run")}),
                            "moe_dropless");
  expect_trains(r, path("run") + "/metrics.jsonl", kIters, unigram_entropy_, true);
}

TEST_F(TrainerCliTest, MoeTrainsOnTheCpuWithTokenDrop) {
  constexpr int kIters = 150;
  const RunResult r =
      train(with(kMoe, {"model.moe_expert_capacity_factor=1.0", "model.moe_pad_expert_input_to_capacity=true",
                        "train.train_iters=" + std::to_string(kIters), "train.global_batch_size=8", "--run-dir",
                        path("run")}),
            "moe_drop");
  expect_trains(r, path("run") + "/metrics.jsonl", kIters, unigram_entropy_, false);
}

}  // namespace
