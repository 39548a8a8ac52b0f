// The MoE layer's CPU fp32 twin: every parameter's and the input's gradient against central finite
// differences of  L = <out, R> + aux_loss + z_loss  (R random), for dropless and token-drop dispatch,
// softmax / sigmoid / sqrtsoftplus routing with the expert bias, seq_aux_loss, a shared expert and the experts' linear
// biases (add_bias_linear). Routing is piecewise
// constant in the weights: a coordinate whose +-eps perturbation changes the routing or the drop
// decisions is skipped (counted; at most a few per case). Also: the dispatch invariants (dropless keeps
// every slot, capacity bounds every expert) and the expert-bias update of step_end.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "model/layer_registry.h"
#include "moe_layer_case.h"
#include "test_util.h"

namespace sg::model {
namespace {

using test::MoeCase;

constexpr double kEps = 1e-2;
constexpr double kRelTol = 2e-2;

struct Harness {
  ModelSpec spec;
  BatchSpec batch;
  MoeLayerCpu layer;
  ModelLayout layout;
  std::vector<float> weights, grads, input, output, d_output, d_input;
  int64_t T, H;

  explicit Harness(const MoeCase& c)
      : spec(test::moe_case_spec(c)),
        batch(test::moe_case_batch(c)),
        layer(stack_places(spec)[0]),
        layout(test::declare_moe_case(spec, layer)) {
    layer.plan(spec, batch);
    T = batch.tokens_per_microbatch(spec);
    H = spec.hidden_size;
    weights = test::moe_case_weights(layout, 11);
    grads.assign(weights.size(), 0.0f);
    input = test::random_values(static_cast<size_t>(T * H), 3);
    output.resize(input.size());
    d_output = test::random_values(input.size(), 5);
    d_input.resize(input.size());
  }

  CpuLayerIO io(AuxLosses* aux) {
    CpuLayerIO io{layout};
    io.weights = weights.data();
    io.grads = grads.data();
    io.input = input.data();
    io.output = output.data();
    io.d_output = d_output.data();
    io.d_input = d_input.data();
    io.aux_losses = aux;
    io.loss_scale = 1.0f;
    return io;
  }

  // The objective and the routing decisions it was computed with.
  double objective(std::vector<int32_t>* decisions) {
    AuxLosses aux;
    layer.forward(io(&aux));
    double sum = aux.load_balancing + aux.z;
    for (size_t i = 0; i < output.size(); ++i) sum += static_cast<double>(output[i]) * d_output[i];
    if (decisions != nullptr) {
      *decisions = layer.routing_map();
      decisions->insert(decisions->end(), layer.slot_to_row().begin(), layer.slot_to_row().end());
    }
    return sum;
  }
};

// Analytic vs numeric gradient of the coordinates [0, n) of `x`; returns the skipped count.
int check_block(Harness& h, std::vector<float>& x, int64_t offset, int64_t n, const std::vector<float>& analytic,
                const std::vector<int32_t>& decisions, const std::string& what) {
  std::vector<float> a, num;
  int skipped = 0;
  for (int64_t i = 0; i < n; ++i) {
    float& v = x[static_cast<size_t>(offset + i)];
    const float saved = v;
    std::vector<int32_t> dp, dm;
    v = saved + static_cast<float>(kEps);
    const double plus = h.objective(&dp);
    v = saved - static_cast<float>(kEps);
    const double minus = h.objective(&dm);
    v = saved;
    if (dp != decisions || dm != decisions) {
      ++skipped;
      continue;
    }
    a.push_back(analytic[static_cast<size_t>(offset + i)]);
    num.push_back(static_cast<float>((plus - minus) / (2.0 * kEps)));
  }
  const double err = test::relative_error(a, num);
  double norm = 0.0;
  for (float g : num) norm += static_cast<double>(g) * g;
  std::printf("  %-44s |grad| %.3e  rel err %.2e  skipped %d/%lld\n", what.c_str(), std::sqrt(norm), err, skipped,
              static_cast<long long>(n));
  EXPECT_LT(err, kRelTol) << what;
  EXPECT_GT(norm, 0.0) << what << ": a zero gradient cannot test anything";
  EXPECT_LE(skipped, std::max<int64_t>(2, n / 10)) << what << ": too many coordinates flip the routing";
  return skipped;
}

class MoeLayerCpuGrad : public ::testing::TestWithParam<MoeCase> {};

TEST_P(MoeLayerCpuGrad, ParametersAndInputMatchFiniteDifferences) {
  Harness h(GetParam());
  std::vector<int32_t> decisions;
  h.objective(&decisions);
  h.layer.backward(h.io(nullptr));
  const std::vector<float> grads = h.grads;
  const std::vector<float> d_input = h.d_input;
  for (const auto& t : h.layout.tensors()) {
    // The layer's own tensors (the pre-norm, final norm, embedding and head are the step's).
    if (t.name.find("mixer.") == std::string::npos) continue;
    if (t.name.find("e_score_correction_bias") != std::string::npos) {
      for (int64_t i = 0; i < t.numel; ++i) EXPECT_EQ(grads[static_cast<size_t>(t.offset + i)], 0.0f) << t.name;
      continue;  // steers the selection only: no gradient
    }
    check_block(h, h.weights, t.offset, t.numel, grads, decisions, t.name);
  }
  check_block(h, h.input, 0, h.T * h.H, d_input, decisions, "d input");
}

TEST_P(MoeLayerCpuGrad, DispatchKeepsWhatTheCapacityAllows) {
  const MoeCase& c = GetParam();
  Harness h(c);
  h.layer.step_begin();
  h.objective(nullptr);
  const MoeShapes& s = h.layer.shapes();
  int64_t kept = 0;
  for (int64_t e = 0; e < s.E; ++e) {
    const int32_t n = h.layer.kept_counts()[static_cast<size_t>(e)];
    kept += n;
    if (!s.dispatch.dropless()) {
      EXPECT_LE(n, s.dispatch.capacity) << "expert " << e;
    }
    EXPECT_EQ(n, h.layer.step_token_counts()[static_cast<size_t>(e)]) << "one microbatch: step counts = kept";
  }
  if (s.dispatch.dropless()) {
    EXPECT_EQ(kept, s.T * s.k);
  } else {
    EXPECT_LE(kept, s.T * s.k);
  }
}

const MoeCase kCases[] = {
    {.name = "dropless_softmax_shared", .H = 6, .E = 5, .k = 2, .F = 3, .S = 4, .micro_batch = 2, .seq = 5},
    {.name = "dropless_pre_softmax_top1", .H = 7, .E = 4, .k = 1, .F = 5, .S = 0, .micro_batch = 1, .seq = 9,
     .pre_softmax = true, .scaling = 2.0, .aux = 0.3, .z = 0.0},
    {.name = "sigmoid_bias_seq_aux", .H = 6, .E = 6, .k = 3, .F = 4, .S = 0, .micro_batch = 3, .seq = 3,
     .score = ref::MoeScoreFunction::sigmoid, .scaling = 2.5, .balancing = MoeLoadBalancing::seq_aux_loss,
     .expert_bias = true},
    // DeepSeek-V4's sqrtsoftplus routing, with the expert bias (Megatron routes it as sigmoid).
    {.name = "sqrtsoftplus_bias_seq_aux", .H = 6, .E = 6, .k = 3, .F = 4, .S = 0, .micro_batch = 3, .seq = 3,
     .score = ref::MoeScoreFunction::sqrtsoftplus, .scaling = 2.5, .balancing = MoeLoadBalancing::seq_aux_loss,
     .expert_bias = true},
    {.name = "drop_probs_padded", .H = 5, .E = 4, .k = 2, .F = 3, .S = 2, .micro_batch = 2, .seq = 6,
     .capacity_factor = 0.5, .pad = true},
    {.name = "drop_position", .H = 6, .E = 3, .k = 2, .F = 4, .S = 0, .micro_batch = 2, .seq = 5,
     .capacity_factor = 0.75, .drop = ref::MoeDropPolicy::position},
    // Nemotron-H's experts: squared ReLU, routed and shared.
    {.name = "squared_relu_shared", .H = 6, .E = 5, .k = 2, .F = 3, .S = 4, .micro_batch = 2, .seq = 5,
     .activation = MlpActivation::squared_relu},
    {.name = "squared_relu_sigmoid_bias_dropped", .H = 6, .E = 5, .k = 2, .F = 4, .S = 2, .micro_batch = 2,
     .seq = 5, .score = ref::MoeScoreFunction::sigmoid, .scaling = 2.5, .expert_bias = true,
     .capacity_factor = 0.75, .activation = MlpActivation::squared_relu},
    // Qwen2-MoE's gated shared expert (moe_shared_expert_gate): the gate weight and d n through it.
    {.name = "dropless_softmax_shared_gate", .H = 6, .E = 5, .k = 2, .F = 3, .S = 4, .micro_batch = 2, .seq = 5,
     .shared_gate = true},
    {.name = "squared_relu_shared_gate", .H = 6, .E = 4, .k = 2, .F = 3, .S = 3, .micro_batch = 2, .seq = 5,
     .activation = MlpActivation::squared_relu, .shared_gate = true},
    // add_bias_linear: the experts' FC1 (gate | up) and FC2 biases, dropless and with token drop padded to capacity
    // (the padding rows get the biases too; nothing reaches the output or the gradients from them).
    {.name = "linear_biases_dropless", .H = 6, .E = 5, .k = 2, .F = 3, .S = 0, .micro_batch = 2, .seq = 5,
     .linear_biases = true},
    {.name = "linear_biases_padded_squared_relu", .H = 5, .E = 4, .k = 2, .F = 3, .S = 0, .micro_batch = 2, .seq = 6,
     .capacity_factor = 0.5, .pad = true, .activation = MlpActivation::squared_relu, .linear_biases = true},
};

INSTANTIATE_TEST_SUITE_P(Cases, MoeLayerCpuGrad, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(MoeLayerCpu, ExpertBiasMovesTowardsBalanceAfterTheStep) {
  MoeCase c = kCases[2];
  Harness h(c);
  h.layer.step_begin();
  h.objective(nullptr);
  const std::vector<int32_t> counts = h.layer.step_token_counts();
  const ParamTensor& bias = h.layout.find("backbone.layers.0.mixer.gate.e_score_correction_bias");
  const std::vector<float> before(h.weights.begin() + bias.offset, h.weights.begin() + bias.offset + bias.numel);
  h.layer.step_end(h.layout, h.weights.data());
  double mean = 0.0;
  for (int32_t n : counts) mean += n;
  mean /= static_cast<double>(counts.size());
  for (size_t e = 0; e < counts.size(); ++e) {
    const float moved = h.weights[static_cast<size_t>(bias.offset) + e] - before[e];
    const float expected = counts[e] < mean ? 0.05f : counts[e] > mean ? -0.05f : 0.0f;
    EXPECT_NEAR(moved, expected, 1e-6) << "expert " << e << " with " << counts[e] << " tokens (mean " << mean << ")";
  }
  for (int32_t n : h.layer.step_token_counts()) EXPECT_EQ(n, 0) << "step_end zeroes the step's counts";
}

TEST(MoeLayerCpu, RegisteredForTheLetterE) {
  EXPECT_TRUE(layer_kind_implemented(LayerKind::moe));
  ModelSpec spec = test::moe_case_spec(kCases[0]);
  const ModelLayout layout = model_layout(spec);
  EXPECT_NO_THROW(layout.find("backbone.layers.0.mixer.experts.4.w3.weight"));
  EXPECT_NO_THROW(layout.find("backbone.layers.0.mixer.shared_expert.down_proj.weight"));
}

// Squared-ReLU experts carry Nemotron-H's names and one [F, H] FC1 per expert (no gate rows).
TEST(MoeLayerCpu, SquaredReluExpertsHaveNemotronHNamesAndNoGate) {
  MoeCase c = kCases[0];
  c.activation = MlpActivation::squared_relu;
  const ModelSpec spec = test::moe_case_spec(c);
  const ModelLayout layout = model_layout(spec);
  const ParamTensor& up = layout.find("backbone.layers.0.mixer.experts.4.up_proj.weight");
  EXPECT_EQ(up.numel, c.F * c.H);
  EXPECT_NO_THROW(layout.find("backbone.layers.0.mixer.experts.0.down_proj.weight"));
  EXPECT_NO_THROW(layout.find("backbone.layers.0.mixer.shared_experts.up_proj.weight"));
  EXPECT_NO_THROW(layout.find("backbone.layers.0.mixer.shared_experts.down_proj.weight"));
  EXPECT_THROW(layout.find("backbone.layers.0.mixer.experts.0.w1.weight"), Error);
  EXPECT_THROW(layout.find("backbone.layers.0.mixer.shared_expert.gate_proj.weight"), Error);
  // Nemotron-H's router has the bias also when moe_router_enable_expert_bias is off (zero).
  ASSERT_FALSE(c.expert_bias);
  EXPECT_EQ(layout.find("backbone.layers.0.mixer.gate.e_score_correction_bias").numel, c.E);
  EXPECT_EQ(initial_parameters(layout, 3)[static_cast<size_t>(
                layout.find("backbone.layers.0.mixer.gate.e_score_correction_bias").offset)],
            0.0f);
  // Per expert F*H (FC1) + H*F (FC2) against SwiGLU's 2F*H + H*F; the shared expert likewise; + the bias.
  const auto elements = [](const ModelLayout& l) {
    int64_t n = 0;
    for (const auto& t : l.tensors()) n += t.numel;
    return n;
  };
  EXPECT_EQ(elements(model_layout(test::moe_case_spec(kCases[0]))) - elements(layout),
            c.E * c.F * c.H + c.S * c.H - c.E);
}

// Megatron's initialization and weight-decay groups over every tensor of an MoE model, in both namings: the
// router and each expert's and the shared expert's FC1 N(0, std), their FC2 (and attention's o_proj) the output
// projection's scaled std, norms at 1, the expert bias at 0; matrices decayed, 1-D tensors (norms, the expert
// bias) not.
TEST(MoeLayerCpu, InitAndWeightDecayFollowMegatron) {
  for (const MlpActivation activation : {MlpActivation::swiglu, MlpActivation::squared_relu}) {
    MoeCase c = kCases[0];
    c.activation = activation;
    const ModelLayout layout = model_layout(test::moe_case_spec(c));
    int routers = 0, output_projections = 0, biases = 0;
    for (const ParamTensor& t : layout.tensors()) {
      SCOPED_TRACE(t.name);
      const bool matrix = t.shape.size() >= 2;
      EXPECT_EQ(t.weight_decay, matrix);
      const bool output = t.name.find("down_proj") != std::string::npos || t.name.find(".w2.") != std::string::npos ||
                          t.name.find("o_proj") != std::string::npos;
      if (t.name.find("e_score_correction_bias") != std::string::npos) {
        EXPECT_EQ(t.init, ParamInit::zeros);
        ++biases;
      } else if (!matrix) {
        EXPECT_EQ(t.init, ParamInit::ones);
      } else {
        EXPECT_EQ(t.init, output ? ParamInit::output_projection : ParamInit::normal);
      }
      if (matrix && output) ++output_projections;
      if (t.name.find("gate.weight") != std::string::npos && t.name.find("experts") == std::string::npos) ++routers;
    }
    EXPECT_GT(routers, 0);
    EXPECT_GE(output_projections, c.E) << "every expert's FC2";
    EXPECT_EQ(biases, activation == MlpActivation::squared_relu || c.expert_bias ? 1 : 0);
  }
}

}  // namespace
}  // namespace sg::model
