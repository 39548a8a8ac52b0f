// Activation recompute on the CPU (issue 15): which layers and buffers each setting recomputes, the
// activation bytes it gives back (exactly the saved activations it names), the errors for modules of
// layer kinds the stack lacks, and — the point of it all — training with every setting gives
// bitwise the same losses, gradients, weights and moments as without, with dropout on (the recompute
// draws the forward's masks) and two microbatches. The CPU model poisons what recompute gives back
// with NaN after the forward, so a wrong schedule shows up as NaN or different bits.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>
#include <vector>

#include "core/error.h"
#include "cuda/bf16.h"
#include "model/activation_account.h"
#include "model/cpu_model.h"
#include "model/layer_registry.h"
#include "model/recompute.h"
#include "model/recompute_layout.h"
#include "recompute_runs.h"
#include "tiny_model.h"

namespace sg::model {
namespace {

using G = RecomputeGranularity;
using M = RecomputeModule;

using test::full;
using test::selective;

ModelSpec with(RecomputeSpec r, int64_t blocks = 3) {
  ModelSpec s = test::tiny_model_spec();
  s.num_layers = blocks;
  s.recompute = std::move(r);
  return s;
}

std::vector<std::pair<int, int>> groups(const RecomputeLayout& l) {
  std::vector<std::pair<int, int>> out;
  for (const RecomputeGroup& g : l.groups()) out.push_back({g.begin, g.end});
  return out;
}

TEST(RecomputeLayout, SelectiveModulesApplyToTheirLayerKind) {
  const RecomputeLayout attn(with(selective({M::core_attn})));  // layers *-*-*-
  EXPECT_EQ(groups(attn), (std::vector<std::pair<int, int>>{{0, 1}, {2, 3}, {4, 5}}));
  EXPECT_TRUE(attn.recomputes(0, M::core_attn));
  EXPECT_FALSE(attn.recomputes(0, std::nullopt));  // qkv: only full recompute gives it back
  EXPECT_FALSE(attn.recomputes(1, M::mlp));
  EXPECT_FALSE(attn.recomputes_norm(0));
  EXPECT_TRUE(attn.reruns_layer(2));
  EXPECT_FALSE(attn.reruns_layer(3));
  EXPECT_EQ(attn.group_ending_at(2), &attn.groups()[1]);

  const RecomputeLayout mlp(with(selective({M::mlp})));
  EXPECT_EQ(groups(mlp), (std::vector<std::pair<int, int>>{{1, 2}, {3, 4}, {5, 6}}));

  // layernorm is the step's: every layer's pre-norm output, never the final norm's (the LM head input).
  const RecomputeLayout norm(with(selective({M::layernorm})));
  EXPECT_EQ(groups(norm).size(), 6u);
  for (int k = 0; k < 6; ++k) EXPECT_TRUE(norm.recomputes_norm(k)) << k;
  EXPECT_FALSE(norm.recomputes_norm(6));
  EXPECT_FALSE(norm.recomputes_residual(3));
  EXPECT_FALSE(norm.reruns_layer(0));  // only the norm reruns

  const RecomputeLayout off(with({}));
  EXPECT_TRUE(off.groups().empty());
}

TEST(RecomputeLayout, FullRecomputeChunksMegatronLayers) {
  // uniform, 2 Megatron layers (GPT blocks) per chunk: stack layers [0,4) and [4,6), alternating buffers.
  const RecomputeLayout uniform(with(full(RecomputeMethod::uniform, 2)));
  EXPECT_EQ(groups(uniform), (std::vector<std::pair<int, int>>{{0, 4}, {4, 6}}));
  EXPECT_EQ(uniform.groups()[0].buffer, 0);
  EXPECT_EQ(uniform.groups()[1].buffer, 1);
  EXPECT_FALSE(uniform.recomputes_residual(0));  // the chunk's input is kept
  for (int k : {1, 2, 3, 5}) EXPECT_TRUE(uniform.recomputes_residual(k)) << k;
  EXPECT_FALSE(uniform.recomputes_residual(4));
  EXPECT_FALSE(uniform.recomputes_residual(6));
  for (int k = 0; k < 6; ++k) EXPECT_TRUE(uniform.recomputes_norm(k)) << k;
  EXPECT_TRUE(uniform.recomputes(2, std::nullopt));
  EXPECT_EQ(uniform.group_ending_at(3), &uniform.groups()[0]);
  EXPECT_EQ(uniform.group_ending_at(2), nullptr);

  // block: only the first Megatron layer.
  const RecomputeLayout block(with(full(RecomputeMethod::block, 1)));
  EXPECT_EQ(groups(block), (std::vector<std::pair<int, int>>{{0, 2}}));
  EXPECT_FALSE(block.recomputes_norm(2));
  EXPECT_FALSE(block.reruns_layer(2));

  // A hybrid pattern: one Megatron layer per letter.
  ModelSpec hybrid = with(full(RecomputeMethod::uniform, 1));
  hybrid.hybrid_layer_pattern = "*--*";
  hybrid.num_layers = 4;
  EXPECT_EQ(groups(RecomputeLayout(hybrid)), (std::vector<std::pair<int, int>>{{0, 1}, {1, 2}, {2, 3}, {3, 4}}));
}

TEST(ActivationAccount, RecomputeGivesBackExactlyTheNamedActivations) {
  ModelSpec base = test::tiny_model_spec();
  base.hidden_size = 64;
  base.num_attention_heads = 4;
  base.num_query_groups = 2;
  base.ffn_hidden_size = 128;
  base.seq_length = 64;
  base.num_layers = 4;
  BatchSpec batch;
  batch.micro_batch_size = 2;
  const size_t T = 128, H = 64;
  const size_t boundary = 2 * T * H * sizeof(bf16) + T * sizeof(float);

  const ActivationAccount off = activation_account(base, batch);
  ASSERT_EQ(off.layers.size(), 8u);
  EXPECT_EQ(off.recompute_buffer_bytes, 0u);
  EXPECT_EQ(off.with_recompute(), off.without_recompute());
  // attention: x, n, rstd + qkv [T, H + 2 KV] + attn_out [T, H] bf16 + lse [B, heads, S] fp32.
  const size_t attn_out = T * H * sizeof(bf16), lse = 2 * 4 * 64 * sizeof(float);
  EXPECT_EQ(off.layers[0].bytes, boundary + T * (H + 2 * 32) * sizeof(bf16) + attn_out + lse);
  // MLP: x, n, rstd + gate_up [T, 2F] + swiglu [T, F] bf16.
  EXPECT_EQ(off.layers[1].bytes, boundary + T * 3 * 128 * sizeof(bf16));

  ModelSpec core_attn = base;
  core_attn.recompute = selective({M::core_attn});
  const ActivationAccount a = activation_account(core_attn, batch);
  EXPECT_EQ(a.without_recompute(), off.without_recompute());
  EXPECT_EQ(a.layers[0].recomputed, attn_out + lse);
  EXPECT_EQ(a.layers[1].recomputed, 0u);
  EXPECT_EQ(a.recompute_buffer_bytes, attn_out + lse);  // one group's worth, every offset 256-aligned
  EXPECT_LT(a.with_recompute(), off.without_recompute());

  ModelSpec uniform = base;
  uniform.recompute = full(RecomputeMethod::uniform, 1);
  const ActivationAccount f = activation_account(uniform, batch);
  for (const LayerActivations& l : f.layers) {
    // Kept: the rstd of its pre-norm, and the block's input x at the first layer of each block.
    EXPECT_EQ(l.kept(), T * sizeof(float) + (l.layer % 2 == 0 ? T * H * sizeof(bf16) : 0)) << l.layer;
  }
  // Two buffers of one block's recomputed activations each.
  EXPECT_EQ(f.recompute_buffer_bytes, 2 * (f.layers[0].recomputed + f.layers[1].recomputed));
  EXPECT_LT(f.with_recompute(), a.with_recompute());

  const std::vector<std::string> lines = describe_activations(uniform, f);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_NE(lines[0].find("8 stack layers"), std::string::npos) << lines[0];
  EXPECT_NE(lines[0].find("recompute full, uniform"), std::string::npos) << lines[0];
  EXPECT_NE(lines[1].find("4 attention layers (0, 2, 4, 6)"), std::string::npos) << lines[1];
}

TEST(CheckRecompute, ModulesOfKindsTheStackLacksAreErrorsNamingTheKind) {
  const auto problem = [](M module) {
    const std::vector<RecomputeProblem> p = check_recompute(with(selective({M::core_attn, module})));
    return p.size() == 1 ? p[0] : RecomputeProblem{"(no single error)", ""};
  };
  // tiny is attention and dense MLP layers only.
  EXPECT_NE(problem(M::moe_act).message.find("this model has no MoE layers (E in the pattern"), std::string::npos)
      << problem(M::moe_act).message;
  EXPECT_NE(problem(M::moe).message.find("MoE layers"), std::string::npos);
  EXPECT_NE(problem(M::shared_experts).message.find("MoE layers"), std::string::npos);
  EXPECT_NE(problem(M::mamba).message.find("no Mamba layers (M in the pattern"), std::string::npos)
      << problem(M::mamba).message;
  EXPECT_NE(problem(M::mamba).fix.find("remove mamba"), std::string::npos) << problem(M::mamba).fix;
  EXPECT_NE(problem(M::mla_up_proj).message.find("no layer kind"), std::string::npos) << problem(M::mla_up_proj).message;
  EXPECT_TRUE(check_recompute(with(selective({M::core_attn, M::mlp, M::layernorm}))).empty());
  EXPECT_TRUE(check_recompute(with(full(RecomputeMethod::uniform, 1))).empty());
  ModelSpec attention_only = with(selective({M::mlp}));
  attention_only.hybrid_layer_pattern = "**";
  attention_only.num_layers = 2;
  const std::vector<RecomputeProblem> p = check_recompute(attention_only);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_NE(p[0].message.find("no dense MLP layers"), std::string::npos) << p[0].message;
  // The kinds' own declarations (model/layer_registry.h; MoE and Mamba: recompute_kinds_test.cpp).
  EXPECT_EQ(layer_kind_recompute(LayerKind::attention).modules, std::vector<M>{M::core_attn});
  EXPECT_TRUE(layer_kind_recompute(LayerKind::mlp).full);
}

test::TrainedRun train(const ModelSpec& spec, int steps) { return test::train_cpu(spec, steps, 500); }

TEST(CpuRecompute, EverySettingTrainsBitwiseLikeNoRecompute) {
  ModelSpec spec = with({}, 3);
  spec.attention_dropout = 0.1f;
  spec.hidden_dropout = 0.1f;
  const test::TrainedRun plain = train(spec, 4);
  const std::vector<std::pair<const char*, RecomputeSpec>> settings = {
      {"selective core_attn", selective({M::core_attn})},
      {"selective mlp", selective({M::mlp})},
      {"selective layernorm", selective({M::layernorm})},
      {"selective core_attn,mlp,layernorm", selective({M::core_attn, M::mlp, M::layernorm})},
      {"full uniform 1", full(RecomputeMethod::uniform, 1)},
      {"full uniform 2", full(RecomputeMethod::uniform, 2)},
      {"full block 2", full(RecomputeMethod::block, 2)},
  };
  for (const auto& [name, r] : settings) {
    SCOPED_TRACE(name);
    ModelSpec s = spec;
    s.recompute = r;
    test::expect_same_training(train(s, 4), plain);
  }
  // A hybrid pattern with every layer its own full-recompute chunk.
  ModelSpec hybrid = spec;
  hybrid.hybrid_layer_pattern = "*-*-*-";
  hybrid.num_layers = 6;
  const test::TrainedRun hybrid_plain = train(hybrid, 3);
  hybrid.recompute = full(RecomputeMethod::uniform, 4);
  const test::TrainedRun hybrid_full = train(hybrid, 3);
  EXPECT_EQ(hybrid_full.losses, hybrid_plain.losses);
  EXPECT_EQ(hybrid_full.weights, hybrid_plain.weights);
}

}  // namespace
}  // namespace sg::model
