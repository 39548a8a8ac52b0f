// Whole-model gradient check of the CPU fp32 backend: every parameter tensor's gradient against central
// finite differences of the step loss, in the tiny model (two microbatches, masked tokens, untied and
// tied embeddings, with and without dropout — with dropout the masks are a fixed function of the RNG
// state, so the loss is still a differentiable function of the weights and the check applies), and in
// a hybrid pattern whose layer boundaries are not GPT blocks ("*--*": two MLPs in a row, attention last), and with
// Qwen3's query and key norms (model.qk_layernorm: their weights' gradients too), and with Qwen2's QKV bias
// (model.add_qkv_bias: zero at init, so a forward that left it out would give it no finite difference), and with
// every linear's bias (model.add_bias_linear: attention's and the MLP's, in GPT blocks and in Nemotron-H's attention
// without RoPE and squared-ReLU MLP). Without RoPE the key bias's gradient is zero in exact arithmetic (it adds the
// same q.b to every score of a query, which the softmax cancels): checked to be zero, not compared.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

#include "model/cpu_model.h"
#include "tiny_model.h"

namespace sg::model {
namespace {

// Central differences on the fp32 forward: the loss (~3.5) carries fp32 rounding noise of ~1e-6, so
// eps = 1e-2 keeps that noise at ~1e-4 per gradient element while the O(eps^2) truncation error stays
// far below it. A correct backward then agrees to ~1e-3 relative per tensor; a wrong one (a missing
// term, a transposed GEMM, a wrong mask) is off by O(1). The tolerance 1e-2 separates the two.
constexpr double kFdEps = 1e-2;
constexpr double kFdRelTol = 1e-2;

// A gradient this small is zero up to fp32 rounding (the loss is ~3.5, the gradients checked ~1e-2 and up).
constexpr double kZeroGradNorm = 1e-4;

void expect_gradients_match_finite_differences(CpuModel& model, const HostBatch& batch, uint64_t offset) {
  model.compute_gradients(batch, offset);
  const std::vector<float> grads = model.grads();
  std::vector<float>& w = model.weights();
  std::vector<bool> covered(w.size(), false);
  for (const auto& t : model.layout().tensors()) {
    std::vector<float> analytic(static_cast<size_t>(t.numel)), numeric(static_cast<size_t>(t.numel));
    for (int64_t i = 0; i < t.numel; ++i) {
      const size_t at = static_cast<size_t>(t.offset + i);
      covered[at] = true;
      const float saved = w[at];
      w[at] = saved + static_cast<float>(kFdEps);
      const double plus = model.compute_loss(batch, offset);
      w[at] = saved - static_cast<float>(kFdEps);
      const double minus = model.compute_loss(batch, offset);
      w[at] = saved;
      numeric[static_cast<size_t>(i)] = static_cast<float>((plus - minus) / (2.0 * kFdEps));
      analytic[static_cast<size_t>(i)] = grads[at];
    }
    const double err = test::relative_error(analytic, numeric);
    double norm = 0.0, analytic_norm = 0.0;
    for (float g : numeric) norm += static_cast<double>(g) * g;
    for (float g : analytic) analytic_norm += static_cast<double>(g) * g;
    std::printf("  %-48s |grad| %.3e  rel err %.2e\n", t.name.c_str(), std::sqrt(norm), err);
    if (test::gradient_zero_by_symmetry(model.model_spec(), t.name)) {
      EXPECT_LT(std::sqrt(analytic_norm), kZeroGradNorm) << t.name << ": zero by the softmax's shift invariance";
      EXPECT_LT(std::sqrt(norm), kZeroGradNorm) << t.name << ": zero by the softmax's shift invariance";
      continue;
    }
    EXPECT_LT(err, kFdRelTol) << t.name;
    EXPECT_GT(norm, 0.0) << t.name << ": a zero gradient cannot test anything";
  }
  for (size_t i = 0; i < grads.size(); ++i) {
    if (!covered[i]) {
      ASSERT_EQ(grads[i], 0.0f) << "alignment gap " << i << " got a gradient";
    }
  }
}

struct Case {
  bool tied;
  float dropout;
  const char* pattern;  // hybrid_layer_pattern; "" = the GPT layout
  bool qk_layernorm = false;
  bool qkv_bias = false;
  bool bias_linear = false;
  bool nemotron = false;  // Nemotron-H's attention (no RoPE) and squared-ReLU MLP, as patterns with Mamba take
  int64_t rotary_dim = 0;  // partial rotary (model.rotary_percent): RoPE on this many of each head's dimensions
};

class CpuModelGrad : public ::testing::TestWithParam<Case> {};

TEST_P(CpuModelGrad, EveryParameterMatchesFiniteDifferences) {
  const std::string pattern = GetParam().pattern;
  // Patterns with Mamba layers take Nemotron-H's attention (no RoPE) and MLP (squared ReLU) too.
  const bool nemotron = GetParam().nemotron || pattern.find('M') != std::string::npos;
  ModelSpec spec = nemotron ? test::tiny_hybrid_spec(pattern) : test::tiny_model_spec();
  spec.share_embeddings_and_output_weights = GetParam().tied;
  spec.attention_dropout = GetParam().dropout;
  spec.hidden_dropout = GetParam().dropout;
  spec.qk_layernorm = GetParam().qk_layernorm;
  spec.add_qkv_bias = GetParam().qkv_bias;
  spec.add_bias_linear = GetParam().bias_linear;
  spec.rotary_dim = GetParam().rotary_dim;
  spec.hybrid_layer_pattern = GetParam().pattern;
  if (!spec.hybrid_layer_pattern.empty()) spec.num_layers = static_cast<int64_t>(spec.hybrid_layer_pattern.size());
  // Larger weights than a real init, so every path (attention scores, SwiGLU curvature) is exercised
  // away from its linear regime and every gradient is well above the finite-difference noise.
  spec.init_method_std = 0.3;
  BatchSpec batch_spec;
  batch_spec.micro_batch_size = 2;
  batch_spec.num_microbatches = 2;
  CpuModel model(spec, batch_spec, OptimizerSpec{}, rng::RngState{42, 0});
  const HostBatch batch = test::random_batch(spec, batch_spec, 7);
  expect_gradients_match_finite_differences(model, batch, 5);
}

INSTANTIATE_TEST_SUITE_P(
    Tiny, CpuModelGrad,
    ::testing::Values(Case{false, 0.0f, ""}, Case{true, 0.0f, ""}, Case{false, 0.2f, ""}, Case{false, 0.2f, "*--*"},
                      Case{false, 0.2f, "M*-M"}, Case{false, 0.2f, "", true}, Case{false, 0.2f, "", false, true},
                      Case{false, 0.2f, "", false, false, true}, Case{false, 0.2f, "*-*-", false, false, true, true},
                      Case{false, 0.2f, "", true, false, false, false, 2}),
    [](const ::testing::TestParamInfo<Case>& info) {
      return std::string(info.param.tied ? "tied" : "untied") + (info.param.dropout > 0 ? "_dropout" : "") +
             (info.param.pattern[0] != 0 ? "_hybrid" : "") +
             (std::string(info.param.pattern).find('M') != std::string::npos ? "_mamba" : "") +
             (info.param.qk_layernorm ? "_qk_layernorm" : "") + (info.param.qkv_bias ? "_qkv_bias" : "") +
             (info.param.bias_linear ? "_bias_linear" : "") + (info.param.nemotron ? "_nemotron" : "") +
             (info.param.rotary_dim > 0 ? "_partial_rotary" : "");
    });

TEST(CpuModel, DropoutRunsAreReproducibleAndDependOnTheRngOffset) {
  ModelSpec spec = test::tiny_model_spec();
  spec.attention_dropout = 0.1f;
  spec.hidden_dropout = 0.1f;
  BatchSpec batch_spec;
  batch_spec.micro_batch_size = 2;
  batch_spec.num_microbatches = 2;
  const HostBatch batch = test::random_batch(spec, batch_spec, 11);
  CpuModel a(spec, batch_spec, OptimizerSpec{}, rng::RngState{3, 0});
  CpuModel b(spec, batch_spec, OptimizerSpec{}, rng::RngState{3, 0});
  const float loss_a = a.compute_gradients(batch, 0);
  const float loss_b = b.compute_gradients(batch, 0);
  EXPECT_EQ(loss_a, loss_b);
  EXPECT_EQ(a.grads(), b.grads());
  // Another offset draws other masks.
  const float loss_c = b.compute_gradients(batch, 1);
  EXPECT_NE(loss_a, loss_c);
  // Without dropout the offset does not matter.
  spec.attention_dropout = spec.hidden_dropout = 0.0f;
  CpuModel c(spec, batch_spec, OptimizerSpec{}, rng::RngState{3, 0});
  EXPECT_EQ(c.compute_gradients(batch, 0), c.compute_gradients(batch, 9));
  // Dropout changes the loss relative to no dropout (the masks are applied at all).
  EXPECT_NE(loss_a, c.compute_gradients(batch, 0));
}

TEST(CpuModel, MaskedTokensDoNotContribute) {
  const ModelSpec spec = test::tiny_model_spec();
  BatchSpec batch_spec;
  batch_spec.micro_batch_size = 2;
  HostBatch batch = test::random_batch(spec, batch_spec, 5);
  CpuModel model(spec, batch_spec, OptimizerSpec{}, rng::RngState{1, 0});
  const double before = model.compute_loss(batch, 0);
  // Changing the target of a masked-out token changes nothing; of a counted token, the loss.
  size_t masked = 0, counted = 0;
  while (batch.loss_mask[masked] != 0.0f) ++masked;
  while (batch.loss_mask[counted] == 0.0f) ++counted;
  batch.targets[masked] = (batch.targets[masked] + 1) % static_cast<int32_t>(spec.vocab_size);
  EXPECT_EQ(model.compute_loss(batch, 0), before);
  batch.targets[counted] = (batch.targets[counted] + 1) % static_cast<int32_t>(spec.vocab_size);
  EXPECT_NE(model.compute_loss(batch, 0), before);
}

}  // namespace
}  // namespace sg::model
