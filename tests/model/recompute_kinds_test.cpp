// Activation recompute of the MoE and Mamba layer kinds on the CPU (issue 15): the modules they declare
// (moe_act, moe, shared_experts; mamba) and full recompute over MoE and hybrid stacks give back exactly
// the saved activations they name, and training with each gives bitwise the same losses, auxiliary
// losses, gradient norms, weights and moments as without — with dropout on, two microbatches, the
// load-balancing and z-losses, a shared expert, and the expert bias (whose update reads the step's
// token counts: a rerun that counted again, or added a loss again, would show here).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "cuda/bf16.h"
#include "model/activation_account.h"
#include "model/layer_registry.h"
#include "model/recompute.h"
#include "recompute_runs.h"
#include "tiny_model.h"

namespace sg::model {
namespace {

using M = RecomputeModule;

using test::full;
using test::selective;

// The tiny hybrid model with MoE layers: 4 experts, top-2, expert width 12, a shared expert of 8, both
// auxiliary losses; `pattern` picks the layers.
ModelSpec moe_spec(const std::string& pattern) {
  ModelSpec s = test::tiny_hybrid_spec(pattern);
  s.num_moe_experts = 4;
  s.moe_router_topk = 2;
  s.moe_ffn_hidden_size = 12;
  s.moe.shared_expert_intermediate_size = 8;
  s.moe.aux_loss_coeff = 0.1;
  s.moe.z_loss_coeff = 0.01;
  s.attention_dropout = 0.1f;
  s.hidden_dropout = 0.1f;
  return s;
}

// Sigmoid routing with the aux-loss-free expert bias and token drop (capacity 1, by position).
ModelSpec biased_spec(const std::string& pattern) {
  ModelSpec s = moe_spec(pattern);
  s.moe.score_function = ref::MoeScoreFunction::sigmoid;
  s.moe.enable_expert_bias = true;
  s.moe.bias_update_rate = 0.05;
  s.moe.capacity_factor = 1.0;
  s.moe.drop_policy = ref::MoeDropPolicy::position;
  s.moe.shared_expert_intermediate_size = 0;
  return s;
}

test::TrainedRun train(const ModelSpec& spec, int steps) {
  return test::train_cpu(spec, steps, 900);
}

struct Setting {
  const char* name;
  RecomputeSpec recompute;
};

void expect_every_setting_trains_like_no_recompute(const ModelSpec& spec, const std::vector<Setting>& settings) {
  const test::TrainedRun plain = train(spec, 3);
  if (spec.num_moe_experts > 0) {
    EXPECT_GT(plain.aux_losses.front(), 0.0f) << "the auxiliary loss is computed";
  }
  for (const Setting& s : settings) {
    SCOPED_TRACE(s.name);
    ModelSpec with = spec;
    with.recompute = s.recompute;
    ASSERT_TRUE(check_recompute(with).empty()) << check_recompute(with).front().message;
    test::expect_same_training(train(with, 3), plain);
  }
}

TEST(CpuRecomputeKinds, MoeModulesAndFullRecomputeTrainBitwiseLikeNoRecompute) {
  const std::vector<Setting> settings = {
      {"selective moe_act", selective({M::moe_act})},
      {"selective moe", selective({M::moe})},
      {"selective shared_experts", selective({M::shared_experts})},
      {"selective moe_act,shared_experts", selective({M::moe_act, M::shared_experts})},
      {"selective core_attn,moe,layernorm", selective({M::core_attn, M::moe, M::layernorm})},
      {"full uniform 1", full(RecomputeMethod::uniform, 1)},
      {"full uniform 2", full(RecomputeMethod::uniform, 2)},
      {"full block 2", full(RecomputeMethod::block, 2)},
  };
  expect_every_setting_trains_like_no_recompute(moe_spec("*E*E"), settings);
}

TEST(CpuRecomputeKinds, MoeWithExpertBiasAndTokenDropTrainsBitwiseLikeNoRecompute) {
  // The expert bias moves by the step's token counts after every step: a recompute that counted the
  // tokens again would move it differently.
  expect_every_setting_trains_like_no_recompute(biased_spec("*E*E"),
                                                {{"selective moe", selective({M::moe})},
                                                 {"selective moe_act", selective({M::moe_act})},
                                                 {"full uniform 1", full(RecomputeMethod::uniform, 1)}});
}

TEST(CpuRecomputeKinds, HybridMambaMoeStackTrainsBitwiseLikeNoRecompute) {
  const std::vector<Setting> settings = {
      {"selective mamba", selective({M::mamba})},
      {"selective mamba,moe,core_attn,mlp", selective({M::mamba, M::moe, M::core_attn, M::mlp})},
      {"selective mamba,moe_act,layernorm", selective({M::mamba, M::moe_act, M::layernorm})},
      {"full uniform 1", full(RecomputeMethod::uniform, 1)},
      {"full uniform 3", full(RecomputeMethod::uniform, 3)},
      {"full block 2", full(RecomputeMethod::block, 2)},
  };
  expect_every_setting_trains_like_no_recompute(moe_spec("M*EM-E"), settings);
}

// The saved bytes of (layer, module) without recompute, planned as the GPU step plans them.
size_t saved(const std::vector<SavedActivationBytes>& all, int layer, graph::Module module) {
  size_t sum = 0;
  for (const SavedActivationBytes& s : all) {
    if (s.layer == layer && s.module == module) sum += s.bytes;
  }
  return sum;
}

TEST(ActivationAccountKinds, MoeAndMambaModulesGiveBackExactlyTheirActivations) {
  const ModelSpec base = moe_spec("M*E-");
  BatchSpec batch;
  batch.micro_batch_size = 2;
  const size_t T = 16, R = T * 2, F = 12, S = 8;  // dropless: T x top-k permuted rows
  const std::vector<SavedActivationBytes> all = saved_activation_bytes(base, batch);
  const size_t mamba = saved(all, 0, graph::Module::mamba);
  const size_t moe_whole = saved(all, 2, graph::Module::moe_router) + saved(all, 2, graph::Module::moe_preprocess) +
                           saved(all, 2, graph::Module::moe);
  ASSERT_GT(mamba, 0u);
  const ActivationAccount off = activation_account(base, batch);
  ASSERT_EQ(off.layers.size(), 4u);

  const auto recomputed = [&](RecomputeSpec r) {
    ModelSpec s = base;
    s.recompute = std::move(r);
    const ActivationAccount a = activation_account(s, batch);
    EXPECT_EQ(a.without_recompute(), off.without_recompute());
    // The recompute buffer holds a group (at these tiny sizes its 256-byte alignment outweighs the
    // saving; the CLI test sees the totals shrink on the recipes).
    std::vector<size_t> out;
    for (const LayerActivations& l : a.layers) {
      out.push_back(l.recomputed);
      EXPECT_GE(a.recompute_buffer_bytes, l.recomputed);
    }
    return out;
  };
  // moe_act: the experts' activation output [rows, F] bf16.
  EXPECT_EQ(recomputed(selective({M::moe_act})), (std::vector<size_t>{0, 0, R * F * sizeof(bf16), 0}));
  // shared_experts: its FC1 output ([T, S] with the squared ReLU of tiny_hybrid_spec; [T, 2S] gated) and its
  // activation output [T, S] bf16.
  ASSERT_EQ(base.mlp_activation, MlpActivation::squared_relu);
  EXPECT_EQ(recomputed(selective({M::shared_experts})), (std::vector<size_t>{0, 0, T * 2 * S * sizeof(bf16), 0}));
  ModelSpec gated = base;
  gated.mlp_activation = MlpActivation::swiglu;
  gated.recompute = selective({M::shared_experts});
  EXPECT_EQ(activation_account(gated, batch).layers[2].recomputed, T * 3 * S * sizeof(bf16));
  // moe: every saved activation of the layer (moe_act and shared_experts with it change nothing).
  EXPECT_EQ(recomputed(selective({M::moe})), (std::vector<size_t>{0, 0, moe_whole, 0}));
  EXPECT_EQ(recomputed(selective({M::moe_act, M::moe, M::shared_experts})), (std::vector<size_t>{0, 0, moe_whole, 0}));
  // mamba: every saved activation of the mixer.
  EXPECT_EQ(recomputed(selective({M::mamba})), (std::vector<size_t>{mamba, 0, 0, 0}));
  // full: everything but the chunk's input (and each pre-norm's rstd).
  const std::vector<size_t> f = recomputed(full(RecomputeMethod::uniform, 1));
  for (size_t i = 0; i < f.size(); ++i)
    EXPECT_EQ(f[i], off.layers[i].bytes - T * sizeof(float) - T * 16 * sizeof(bf16)) << i;
}

TEST(CheckRecomputeKinds, MoeAndMambaDeclareTheirModulesAndFullRecompute) {
  EXPECT_EQ(layer_kind_recompute(LayerKind::moe).modules, (std::vector<M>{M::moe_act, M::moe, M::shared_experts}));
  EXPECT_TRUE(layer_kind_recompute(LayerKind::moe).full);
  EXPECT_EQ(layer_kind_recompute(LayerKind::mamba).modules, std::vector<M>{M::mamba});
  EXPECT_TRUE(layer_kind_recompute(LayerKind::mamba).full);

  ModelSpec hybrid = moe_spec("M*E-");
  hybrid.recompute = selective({M::moe_act, M::moe, M::shared_experts, M::mamba, M::core_attn, M::mlp});
  EXPECT_TRUE(check_recompute(hybrid).empty());

  // A module whose layer kind this stack lacks: an error naming the kind and the stack.
  const auto problem = [](const std::string& pattern, M module) {
    ModelSpec s = moe_spec(pattern);
    s.recompute = selective({module});
    const std::vector<RecomputeProblem> p = check_recompute(s);
    return p.size() == 1 ? p[0] : RecomputeProblem{"(no single problem)", ""};
  };
  for (const M module : {M::moe_act, M::moe, M::shared_experts}) {
    const RecomputeProblem p = problem("M*-", module);
    EXPECT_NE(p.message.find("this model has no MoE layers (E in the pattern"), std::string::npos) << p.message;
    EXPECT_NE(p.fix.find(recompute_module_name(module)), std::string::npos) << p.fix;
  }
  EXPECT_NE(problem("*E", M::mamba).message.find("no Mamba layers (M in the pattern"), std::string::npos)
      << problem("*E", M::mamba).message;
  EXPECT_NE(problem("ME", M::core_attn).message.find("no attention layers"), std::string::npos);
  // shared_experts without a shared expert.
  ModelSpec no_shared = biased_spec("*E");
  no_shared.recompute = selective({M::shared_experts});
  const std::vector<RecomputeProblem> p = check_recompute(no_shared);
  ASSERT_EQ(p.size(), 1u);
  EXPECT_NE(p[0].message.find("no shared expert"), std::string::npos) << p[0].message;
  EXPECT_NE(p[0].fix.find("moe_shared_expert_intermediate_size"), std::string::npos) << p[0].fix;
}

}  // namespace
}  // namespace sg::model
