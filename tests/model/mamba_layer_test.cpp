// The Mamba layer kind (model/layers/mamba_layer.h) on the CPU: its NemotronH parameter names, shapes,
// weight-decay classes and Megatron init; the CPU twin's gradients against central finite differences
// on a tiny mixer (every parameter and the input); its saved activations; and the regions and scope
// plans of a hybrid pattern "M*-".
#include "model/layers/mamba_layer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>
#include <random>

#include "graph/scope_plan.h"
#include "model/init.h"
#include "model/layer_registry.h"
#include "reference/mamba_init.h"
#include "test_util.h"
#include "tiny_model.h"

namespace sg::model {
namespace {

using graph::Module;
using graph::Phase;
using graph::RegionKey;

TEST(MambaLayer, DeclaresNemotronHTensorsWithMegatronInit) {
  const ModelSpec s = test::tiny_hybrid_spec("M-");
  const ModelLayout layout = model_layout(s);
  // H = 16, 4 heads of 4 (d_inner 16), 2 groups of state 4: conv channels 16 + 16 = 32, in_proj 16 + 32 + 4.
  struct Expected {
    const char* name;
    std::vector<int64_t> shape;
    bool decay;
  };
  const std::vector<Expected> expected = {
      {"backbone.layers.0.mixer.in_proj.weight", {52, 16}, true},
      {"backbone.layers.0.mixer.conv1d.weight", {32, 1, 4}, true},
      {"backbone.layers.0.mixer.out_proj.weight", {16, 16}, true},
      {"backbone.layers.0.mixer.conv1d.bias", {32}, false},
      {"backbone.layers.0.mixer.dt_bias", {4}, false},
      {"backbone.layers.0.mixer.A_log", {4}, false},
      {"backbone.layers.0.mixer.D", {4}, false},
      {"backbone.layers.0.mixer.norm.weight", {16}, false},
  };
  for (const Expected& e : expected) {
    SCOPED_TRACE(e.name);
    const ParamTensor& t = layout.find(e.name);
    EXPECT_EQ(t.shape, e.shape);
    EXPECT_EQ(t.weight_decay, e.decay);
    EXPECT_EQ(t.weight_decay, t.offset < layout.num_decay());
  }
  // Megatron's MambaMixer: in_proj by init_method N(0, init_method_std), out_proj by output_layer_init_method
  // (the std over sqrt(2 num_layers), Megatron's multiplier without is_hybrid_model).
  EXPECT_EQ(layout.find("backbone.layers.0.mixer.in_proj.weight").init, ParamInit::normal);
  EXPECT_EQ(layout.find("backbone.layers.0.mixer.out_proj.weight").init, ParamInit::output_projection);
  EXPECT_EQ(layout.find("backbone.layers.0.norm.weight").shape, std::vector<int64_t>{16});
  EXPECT_EQ(layout.find("backbone.layers.1.mixer.up_proj.weight").shape, (std::vector<int64_t>{24, 16}));  // relu^2
  EXPECT_NE(test::thrown_message([&] { layout.find("backbone.layers.1.mixer.gate_proj.weight"); }), "");

  const std::vector<float> w = initial_parameters(layout, 1234);
  auto values = [&](const char* name) {
    const ParamTensor& t = layout.find(name);
    return std::vector<float>(w.begin() + t.offset, w.begin() + t.offset + t.numel);
  };
  for (float a : values("backbone.layers.0.mixer.A_log")) {
    EXPECT_GE(a, std::log(1.0f) - 1e-6f);  // A_init_range [1, 4]
    EXPECT_LE(a, std::log(4.0f) + 1e-6f);
  }
  for (float b : values("backbone.layers.0.mixer.dt_bias")) {
    const double dt = ref::softplus(b);  // dt in [dt_min, dt_max] = [0.05, 0.5]
    EXPECT_GE(dt, 0.05 - 1e-6);
    EXPECT_LE(dt, 0.5 + 1e-6);
  }
  for (float d : values("backbone.layers.0.mixer.D")) EXPECT_EQ(d, 1.0f);
  for (float n : values("backbone.layers.0.mixer.norm.weight")) EXPECT_EQ(n, 1.0f);
  const std::vector<float> conv = values("backbone.layers.0.mixer.conv1d.weight");
  float conv_max = 0.0f;
  for (float c : conv) conv_max = std::max(conv_max, std::abs(c));
  EXPECT_LE(conv_max, 0.5f);  // PyTorch's Conv1d default: U(-1/sqrt(4), 1/sqrt(4))
  EXPECT_GT(conv_max, 0.3f);  // and not a tiny normal
  // The values are reference/mamba_init.h's for the tensor's stream: the same on every backend.
  const auto& tensors = layout.tensors();
  const size_t a_log_stream = static_cast<size_t>(
      std::find_if(tensors.begin(), tensors.end(), [](const ParamTensor& t) { return t.name == "backbone.layers.0.mixer.A_log"; }) -
      tensors.begin());
  std::vector<float> a_ref(4);
  ref::MambaInitSpec init;
  init.A_init_min = 1.0;
  init.A_init_max = 4.0;
  init.dt_min = 0.05;
  init.dt_max = 0.5;
  ref::mamba_init_A_log(a_ref.data(), 4, init, 1234, static_cast<uint32_t>(a_log_stream));
  EXPECT_EQ(values("backbone.layers.0.mixer.A_log"), a_ref);
}

TEST(MambaLayer, ShapeErrorsNameTheKey) {
  ModelSpec s = test::tiny_hybrid_spec("M");
  s.mamba.num_groups = 3;  // 4 heads
  EXPECT_NE(test::thrown_message([&] { model_layout(s); }).find("model.mamba_num_groups = 3"), std::string::npos);
  s = test::tiny_hybrid_spec("M");
  s.mamba.num_heads = 0;
  s.mamba.head_dim = 5;  // 2 * 16 not a multiple of 5
  EXPECT_NE(test::thrown_message([&] { model_layout(s); }).find("set model.mamba_num_heads"), std::string::npos);
  s = test::tiny_hybrid_spec("M");
  s.mamba.conv_kernel = 3;
  EXPECT_NE(test::thrown_message([&] { model_layout(s); }).find("model.mamba_conv_kernel = 3"), std::string::npos);
  s = test::tiny_hybrid_spec("M");
  s.mamba.A_init_min = 0.0;
  EXPECT_NE(test::thrown_message([&] { model_layout(s); }).find("A_init_range"), std::string::npos);
}

// One Mamba layer's CPU twin, its loss L = sum(delta * R) for a fixed random R.
struct TinyMixer {
  ModelSpec spec;
  BatchSpec batch;
  std::vector<std::unique_ptr<CpuLayer>> layers;
  ModelLayout layout;
  std::vector<float> weights, input, probe;

  explicit TinyMixer(ModelSpec s)
      : spec(std::move(s)),
        layers(make_cpu_layers(spec)),
        layout(declare_model(spec, [this](size_t i, LayerDeclarations& d) { layers[i]->declare(d); })) {
    batch.micro_batch_size = 2;
    layers[0]->plan(spec, batch);
    weights = initial_parameters(layout, 77);
    const size_t n = static_cast<size_t>(batch.tokens_per_microbatch(spec) * spec.hidden_size);
    input = test::random_normal(n, 5);
    probe = test::random_normal(n, 6);
  }
  size_t n() const { return input.size(); }

  double loss() {
    std::vector<float> out(n());
    CpuLayerIO io{layout, weights.data(), nullptr, input.data(), out.data(), nullptr, nullptr, {}};
    layers[0]->forward(io);
    double l = 0.0;
    for (size_t i = 0; i < n(); ++i) l += static_cast<double>(out[i]) * probe[i];
    return l;
  }
  // Returns the parameter gradients; *d_input gets dL/d input.
  std::vector<float> gradients(std::vector<float>* d_input) {
    std::vector<float> out(n()), grads(weights.size(), 0.0f);
    d_input->assign(n(), 0.0f);
    CpuLayerIO io{layout, weights.data(), grads.data(), input.data(), out.data(), probe.data(), d_input->data(), {}};
    layers[0]->forward(io);
    layers[0]->backward(io);
    return grads;
  }
};

// Central differences on the fp32 twin: L ~ 10-100 carries fp32 noise ~1e-5, so eps = 1e-2 keeps it at
// ~1e-3 per element while the O(eps^2) truncation stays below; a correct backward agrees to ~1e-3 per
// tensor, a wrong one (a missing term, a wrong slice of the in_proj row) is off by O(1).
constexpr double kEps = 1e-2;
constexpr double kTol = 1e-2;

double central_difference(TinyMixer& m, float& x) {
  const float saved = x;
  x = saved + static_cast<float>(kEps);
  const double plus = m.loss();
  x = saved - static_cast<float>(kEps);
  const double minus = m.loss();
  x = saved;
  return (plus - minus) / (2.0 * kEps);
}

TEST(MambaLayerCpu, GradientsMatchFiniteDifferences) {
  ModelSpec s = test::tiny_hybrid_spec("M");
  s.init_method_std = 0.3;  // projections large enough that every path is away from its linear regime
  TinyMixer m(s);
  std::vector<float> d_input;
  const std::vector<float> grads = m.gradients(&d_input);
  for (const ParamTensor& t : m.layout.tensors()) {
    if (t.name.find(".mixer.") == std::string::npos) continue;  // the step's norms and embedding
    std::vector<float> analytic(static_cast<size_t>(t.numel)), numeric(analytic.size());
    for (int64_t i = 0; i < t.numel; ++i) {
      numeric[static_cast<size_t>(i)] =
          static_cast<float>(central_difference(m, m.weights[static_cast<size_t>(t.offset + i)]));
      analytic[static_cast<size_t>(i)] = grads[static_cast<size_t>(t.offset + i)];
    }
    const double err = test::relative_error(analytic, numeric);
    double norm = 0.0;
    for (float g : numeric) norm += static_cast<double>(g) * g;
    std::printf("  %-44s |grad| %.3e  rel err %.2e\n", t.name.c_str(), std::sqrt(norm), err);
    EXPECT_LT(err, kTol) << t.name;
    EXPECT_GT(std::sqrt(norm), 1e-3) << t.name << ": a vanishing gradient tests nothing";
  }
  std::vector<float> numeric(m.n());
  for (size_t i = 0; i < m.n(); ++i) numeric[i] = static_cast<float>(central_difference(m, m.input[i]));
  const double err = test::relative_error(d_input, numeric);
  std::printf("  %-44s rel err %.2e\n", "d input", err);
  EXPECT_LT(err, kTol);
}

// The dt limit clamps dt and passes no gradient where it clips; the gradient stays exact elsewhere.
TEST(MambaLayerCpu, DtLimitClampsAndStillMatchesFiniteDifferences) {
  ModelSpec s = test::tiny_hybrid_spec("M");
  s.init_method_std = 0.3;
  s.mamba.dt_limit_max = 0.2;
  TinyMixer clamped(s);
  s.mamba.dt_limit_max = std::numeric_limits<double>::infinity();
  TinyMixer unclamped(s);
  EXPECT_NE(clamped.loss(), unclamped.loss());  // some dt were above 0.2
  std::vector<float> d_input;
  const std::vector<float> grads = clamped.gradients(&d_input);
  const ParamTensor& dt_bias = clamped.layout.find("backbone.layers.0.mixer.dt_bias");
  std::vector<float> analytic, numeric;
  for (int64_t i = 0; i < dt_bias.numel; ++i) {
    const size_t at = static_cast<size_t>(dt_bias.offset + i);
    analytic.push_back(grads[at]);
    numeric.push_back(static_cast<float>(central_difference(clamped, clamped.weights[at])));
  }
  EXPECT_LT(test::relative_error(analytic, numeric), 5e-2) << "dt_bias with dt_limit";
}

TEST(MambaLayer, SavedActivationsAreCountedForTheMambaModule) {
  const ModelSpec s = test::tiny_hybrid_spec("M*-");
  BatchSpec b;
  b.micro_batch_size = 2;
  const int64_t T = 16;
  const std::vector<SavedActivationBytes> saved = saved_activation_bytes(s, b);
  ASSERT_EQ(saved.size(), 3u);
  EXPECT_EQ(saved[0].module, Module::mamba);
  // in_proj out [T, 52], conv out [T, 32], gated norm out and scan out [T, 16] (bf16); dt [T, 4],
  // A [4], rstd [T, 2] (fp32).
  EXPECT_EQ(saved[0].bytes, static_cast<size_t>(T * 52 * 2 + T * 32 * 2 + 2 * T * 16 * 2 + T * 4 * 4 + 4 * 4 + T * 2 * 4));
  EXPECT_EQ(saved[1].module, Module::attn);
  EXPECT_EQ(saved[2].module, Module::mlp);
  EXPECT_EQ(saved[2].bytes, static_cast<size_t>(T * 24 * 2 + T * 24 * 2));  // up and relu^2 (not gated)
}

// Which regions exist for "M*-", and what each graph scope captures of them.
TEST(MambaLayer, ScopePlanningOfAHybridPattern) {
  const std::vector<graph::LayerRegions> regions = stack_regions(test::tiny_hybrid_spec("M*-"));
  ASSERT_EQ(regions.size(), 3u);
  EXPECT_EQ(regions[0].modules, std::vector<Module>{Module::mamba});
  EXPECT_EQ(regions[1].modules, std::vector<Module>{Module::attn});
  EXPECT_EQ(regions[2].modules, std::vector<Module>{Module::mlp});
  using graph::GraphImpl;
  using graph::GraphScope;
  const graph::ScopePlan mamba =
      graph::plan_graph_scopes(GraphImpl::transformer_engine, {GraphScope::mamba}, regions, 1);
  EXPECT_EQ(mamba.graphed_regions,
            (std::vector<RegionKey>{{0, Module::mamba, Phase::forward}, {0, Module::mamba, Phase::backward}}));
  EXPECT_EQ(mamba.graphable_layers, 1);
  EXPECT_EQ(mamba.total_layers, 3);
  const graph::ScopePlan attn_mamba =
      graph::plan_graph_scopes(GraphImpl::transformer_engine, {GraphScope::attn, GraphScope::mamba}, regions, 1);
  EXPECT_EQ(attn_mamba.graphed_regions,
            (std::vector<RegionKey>{{0, Module::mamba, Phase::forward},
                                    {1, Module::attn, Phase::forward},
                                    {1, Module::attn, Phase::backward},
                                    {0, Module::mamba, Phase::backward}}));
  const graph::ScopePlan mamba_mlp =
      graph::plan_graph_scopes(GraphImpl::transformer_engine, {GraphScope::mamba, GraphScope::mlp}, regions, 1);
  EXPECT_EQ(mamba_mlp.num_graphs(), 4);
  EXPECT_FALSE(mamba_mlp.graphs_region({1, Module::attn, Phase::forward}));
  EXPECT_TRUE(mamba_mlp.graphs_region({2, Module::mlp, Phase::backward}));
  const graph::ScopePlan all = graph::plan_graph_scopes(GraphImpl::transformer_engine, {}, regions, 1);
  EXPECT_EQ(all.num_graphs(), 6);  // every module of every layer, forward and backward
  const graph::ScopePlan local = graph::plan_graph_scopes(GraphImpl::local, {GraphScope::full_iteration}, regions, 1);
  EXPECT_TRUE(local.full_iteration);
  EXPECT_EQ(local.num_graphs(), 1);
}

TEST(MambaLayer, HybridModelsPickNemotronHOnlyInItsShape) {
  std::string why;
  EXPECT_EQ(hf_architecture(test::tiny_hybrid_spec("M*-M"), &why), "NemotronHForCausalLM");
  ModelSpec rope = test::tiny_hybrid_spec("M*-M");
  rope.position_embedding = PositionEmbedding::rope;
  EXPECT_EQ(hf_architecture(rope, &why), "");
  EXPECT_NE(why.find("no RoPE"), std::string::npos) << why;
  ModelSpec swiglu = test::tiny_hybrid_spec("M*-M");
  swiglu.mlp_activation = MlpActivation::swiglu;
  EXPECT_EQ(hf_architecture(swiglu, &why), "");
  EXPECT_NE(why.find("squared ReLU"), std::string::npos) << why;
  // Without attention or MLP layers their options do not matter.
  ModelSpec pure = test::tiny_hybrid_spec("MM");
  pure.position_embedding = PositionEmbedding::rope;
  pure.mlp_activation = MlpActivation::swiglu;
  EXPECT_EQ(hf_architecture(pure), "NemotronHForCausalLM");
  // Llama needs RoPE and SwiGLU.
  ModelSpec gpt = test::tiny_model_spec();
  EXPECT_EQ(hf_architecture(gpt), "LlamaForCausalLM");
  gpt.mlp_activation = MlpActivation::squared_relu;
  EXPECT_EQ(hf_architecture(gpt, &why), "");
  // MoE layers: squared-ReLU experts, sigmoid routing, dropless, a shared expert (NemotronHMoE).
  ModelSpec moe = test::tiny_hybrid_spec("MEM*E");
  moe.num_moe_experts = 4;
  moe.moe_router_topk = 2;
  moe.moe_ffn_hidden_size = 16;
  moe.moe.score_function = ref::MoeScoreFunction::sigmoid;
  moe.moe.shared_expert_intermediate_size = 24;
  EXPECT_EQ(hf_architecture(moe, &why), "NemotronHForCausalLM") << why;
  const auto refused_because = [&](ModelSpec changed, const char* reason) {
    std::string why_not;
    EXPECT_EQ(hf_architecture(changed, &why_not), "") << reason;
    EXPECT_NE(why_not.find(reason), std::string::npos) << why_not;
  };
  ModelSpec changed = moe;
  changed.moe.score_function = ref::MoeScoreFunction::softmax;
  refused_because(changed, "sigmoid");
  changed = moe;
  changed.moe.capacity_factor = 1.0;
  refused_because(changed, "drops no tokens");
  changed = moe;
  changed.moe.shared_expert_intermediate_size = 0;
  refused_because(changed, "shared expert");
  changed = moe;
  changed.mlp_activation = MlpActivation::swiglu;
  refused_because(changed, "squared ReLU");
  changed = moe;
  changed.num_moe_experts = 1;
  changed.moe_router_topk = 1;
  refused_because(changed, "at least 2 experts");
}

}  // namespace
}  // namespace sg::model
