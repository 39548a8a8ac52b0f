#pragma once
// The models of the GPU decoder's every-kind test (gpu_decoder_kinds_gpu_test.cu) and their weights: drawn so that
// no routing choice the test makes is within bf16 rounding of a tie (decoder_kinds_test.cpp checks, on the CPU,
// that such weights are found).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gpu_test_util.h"
#include "model/cpu_decoder.h"
#include "model/init.h"
#include "model/layer_registry.h"
#include "model/reference_forward.h"
#include "model/tiny_model.h"
#include "reference/embedding.h"
#include "reference/linear.h"
#include "reference/rmsnorm.h"

namespace sg::test::decoder_kinds {

struct KindsCase {
  const char* name;
  model::ModelSpec (*spec)();
  double logits_tolerance;  // relative (L2) error against the CPU fp32 decoder
};

inline model::ModelSpec base_spec() {
  model::ModelSpec s = decoder_test_spec();
  s.vocab_size = 1000;
  s.hidden_size = 256;  // 4 heads of 64 in 2 KV groups
  s.num_layers = 2;
  s.num_attention_heads = 4;
  s.num_query_groups = 2;
  s.ffn_hidden_size = 512;
  s.init_method_std = 0.1;
  return s;
}

inline model::ModelSpec mixtral_spec() {
  model::ModelSpec s = with_mixtral_experts(base_spec());
  s.moe_ffn_hidden_size = 136;  // not a tile multiple
  return s;
}

// Qwen2-MoE: Mixtral's experts plus a gated shared expert (the gate kernel after cuBLASLt's shared FC2) and the QKV bias.
inline model::ModelSpec qwen2_moe_spec() {
  model::ModelSpec s = mixtral_spec();
  s.moe.shared_expert_intermediate_size = 200;
  s.moe.shared_expert_gate = true;
  s.add_qkv_bias = true;
  return s;
}

// 8 Mamba heads of 64 in 2 groups of state 32 (in_proj 2 x 512 + 128 + 8 = 1160 columns), as the GPU training tests.
inline model::ModelSpec hybrid_spec(const char* pattern) {
  model::ModelSpec s = base_spec();
  s.hybrid_layer_pattern = pattern;
  s.num_layers = static_cast<int64_t>(std::strlen(pattern));
  s.position_embedding = model::PositionEmbedding::none;
  s.mlp_activation = model::MlpActivation::squared_relu;
  s.mamba.num_heads = 8;
  s.mamba.num_groups = 2;
  s.mamba.state_dim = 32;
  s.mamba.dt_min = 0.05;
  s.mamba.dt_max = 0.5;
  return s;
}

inline model::ModelSpec mamba_hybrid_spec() {
  return hybrid_spec("M*-M");
}

inline model::ModelSpec nemotron3_spec() {
  model::ModelSpec s = hybrid_spec("MEM*E");
  s.num_moe_experts = 8;
  s.moe_router_topk = 2;
  s.moe_ffn_hidden_size = 128;
  s.moe.shared_expert_intermediate_size = 192;
  s.moe.score_function = ref::MoeScoreFunction::sigmoid;
  s.moe.topk_scaling_factor = 2.5;
  s.moe.enable_expert_bias = true;
  return s;
}

inline model::ModelSpec wide_query_spec() {
  model::ModelSpec s = base_spec();
  s.kv_channels = 96;  // 4 heads of 96: a query width of 384 for hidden_size 256
  return s;
}

// Qwen3: every query and key head RMS-normalized before RoPE (the GPU decoder's unfused projection path).
inline model::ModelSpec qwen3_spec() {
  model::ModelSpec s = base_spec();
  s.qk_layernorm = true;
  return s;
}

// Qwen2: a bias on q, k and v (the GPU decoder's kernel adds it before RoPE and the cache; cuBLASLt's epilogue in a
// prompt's rows).
inline model::ModelSpec qwen2_spec() {
  model::ModelSpec s = base_spec();
  s.add_qkv_bias = true;
  return s;
}

// Llama's attention_bias and mlp_bias (model.add_bias_linear): a bias on q, k, v, o_proj and the MLP's linears, fc1's
// before the fused SwiGLU.
inline model::ModelSpec llama_bias_spec() {
  model::ModelSpec s = base_spec();
  s.add_bias_linear = true;
  return s;
}

// The same biases in Nemotron-H's attention (no RoPE) and squared-ReLU MLP, with Mamba layers (which have none).
inline model::ModelSpec hybrid_bias_spec() {
  model::ModelSpec s = mamba_hybrid_spec();
  s.add_bias_linear = true;
  return s;
}

// Megatron's expert biases (add_bias_linear with Mixtral's experts, no shared expert): each expert's FC1 and FC2 bias
// added to its rows after the grouped GEMMs, FC2's before the combine weights it; the attention's biases too.
inline model::ModelSpec mixtral_bias_spec() {
  model::ModelSpec s = mixtral_spec();
  s.add_bias_linear = true;
  return s;
}

// Partial rotary (Phi-4-mini's 0.75 of each head): 48 of 64 dimensions rotated, in the decoding linear's QKV epilogue
// and, for a prompt's rows, by rope_forward.
inline model::ModelSpec partial_rotary_spec() {
  model::ModelSpec s = base_spec();
  s.rotary_dim = 48;
  return s;
}

// Phi-4-mini's LongRoPE on its 0.75 of each head: a factor per rotated pair (here long factors, growing to 9.6), cos
// and sin times its attention factor, in the QKV epilogue and, for a prompt's rows, in rope_forward.
inline model::ModelSpec longrope_spec() {
  model::ModelSpec s = partial_rotary_spec();
  s.rope_scaling.longrope_pairs = 24;
  for (int i = 0; i < 24; ++i) s.rope_scaling.longrope_factors[i] = 1.0f + 0.375f * static_cast<float>(i);
  s.rope_scaling.attention_factor = 1.1902380714238083;  // Phi-3.5-mini's: sqrt(1 + ln 32 / ln 4096)
  return s;
}

inline const KindsCase kDecoderKindsCases[] = {
    {"mixtral", &mixtral_spec, 3e-2},
    {"nemotron3", &nemotron3_spec, 5e-2},
    {"mamba_hybrid", &mamba_hybrid_spec, 5e-2},
    {"wide_query", &wide_query_spec, 2e-2},
    {"qwen3", &qwen3_spec, 2e-2},
    {"qwen2", &qwen2_spec, 2e-2},
    {"llama_bias", &llama_bias_spec, 2e-2},
    {"hybrid_bias", &hybrid_bias_spec, 5e-2},
    {"qwen2_moe", &qwen2_moe_spec, 3e-2},
    {"partial_rotary", &partial_rotary_spec, 2e-2},
    {"longrope", &longrope_spec, 2e-2},
    {"mixtral_bias", &mixtral_bias_spec, 3e-2},
};

// The smallest gap, over the tokens and the MoE layers of the fp32 model, between the selection scores of the k-th
// and the (k+1)-th expert (softmax probabilities, or sigmoid scores plus the expert bias): how far every routing
// choice of the sequence is from a tie, which bf16 activations could flip (one flipped token changes the logits of
// every later row, by far more than bf16 rounding). Infinite without MoE layers.
inline double routing_margin(const model::ModelSpec& spec, const std::vector<float>& w,
                             const std::vector<int32_t>& tokens) {
  model::ModelSpec m = spec;
  m.seq_length = static_cast<int64_t>(tokens.size());
  const int64_t S = m.seq_length, H = m.hidden_size, E = m.num_moe_experts, k = m.moe_router_topk;
  std::vector<std::unique_ptr<model::CpuLayer>> layers = model::make_cpu_layers(m);
  const model::ModelLayout layout =
      model::declare_model(m, [&](size_t i, model::LayerDeclarations& d) { layers[i]->declare(d); });
  for (auto& layer : layers) layer->plan(m, model::BatchSpec{.micro_batch_size = 1});
  const float eps = static_cast<float>(m.layernorm_epsilon);
  const std::vector<model::LayerPlace> places = model::stack_places(m);
  std::vector<float> x(S * H), n(S * H), rstd(S), delta(S * H), logits(S * E);
  ref::embedding_forward(x.data(), tokens.data(), w.data() + layout.offset(layout.embedding), S, H);
  double margin = INFINITY;
  for (size_t i = 0; i < layers.size(); ++i) {
    ref::rmsnorm_forward(n.data(), rstd.data(), x.data(), w.data() + layout.offset(layout.norm_before(i)), S, H, eps);
    if (places[i].kind == model::LayerKind::moe) {
      const std::string& prefix = places[i].param_prefix;
      ref::linear_forward(logits.data(), n.data(), w.data() + layout.find(prefix + "gate.weight").offset, S, H, E);
      const float* bias =
          m.moe.enable_expert_bias ? w.data() + layout.find(prefix + "gate.e_score_correction_bias").offset : nullptr;
      for (int64_t t = 0; t < S; ++t) {
        std::vector<double> score(E);
        const float* row = logits.data() + t * E;
        const float top = *std::max_element(row, row + E);
        double sum = 0.0;
        for (int64_t e = 0; e < E; ++e) {
          if (m.moe.score_function == ref::MoeScoreFunction::sigmoid) {
            score[e] = 1.0 / (1.0 + std::exp(-static_cast<double>(row[e]))) + (bias ? bias[e] : 0.0f);
          } else {
            score[e] = std::exp(static_cast<double>(row[e] - top));
            sum += score[e];
          }
        }
        if (sum > 0.0)
          for (double& v : score) v /= sum;
        std::sort(score.begin(), score.end(), std::greater<>());
        margin = std::min(margin, score[k - 1] - score[k]);
      }
    }
    layers[i]->forward(
        {.layout = layout, .weights = w.data(), .input = n.data(), .output = delta.data(), .dropout = false});
    for (int64_t j = 0; j < S * H; ++j) x[j] += delta[j];
  }
  return margin;
}

// Initial weights rounded to bf16 (the CPU side sees the GPU's weights); the expert biases, zero at init, drawn
// in [-0.3, 0.3] so that they change which experts the sigmoid scores pick, the query and key norms' weights in
// [0.7, 1.3], the linears' biases (zeros at init) in [-0.3, 0.3]. The first seed from `seed` on whose
// routing is at least kRoutingMargin from a tie (see routing_margin) over every prompt and, with new_tokens, the
// CPU decoder's greedy continuation of it (what the GPU decoder feeds, when it is right): a difference is then the
// decoder's, not a flipped near-tie.
// bf16 activations move a router's scores by a few 1e-3 (its logits by about 1% of their spread, times the score's
// slope); a choice at least this far from a tie cannot flip.
inline constexpr double kRoutingMargin = 0.01;
inline std::vector<float> weights_for(const model::ModelSpec& m, uint64_t seed,
                                      const std::vector<std::vector<int32_t>>& prompts, int64_t new_tokens = 0) {
  const model::ModelLayout layout = model::model_layout(m);
  for (uint64_t s = seed; s < seed + 200; ++s) {
    std::vector<float> w = model::initial_parameters(layout, s);
    std::mt19937_64 gen(s);
    std::uniform_real_distribution<float> bias(-0.3f, 0.3f);
    for (const auto& t : layout.tensors()) {
      // Query and key norm weights (ones at init) drawn in [0.7, 1.3]: a norm that read another head's weights
      // would differ.
      const bool qk_norm =
          t.name.find("q_norm.weight") != std::string::npos || t.name.find("k_norm.weight") != std::string::npos;
      const bool linear_bias = t.name.size() > 5 && t.name.compare(t.name.size() - 5, 5, ".bias") == 0;  // zeros
      if (t.name.find("e_score_correction_bias") == std::string::npos && !qk_norm && !linear_bias) continue;
      for (int64_t i = 0; i < t.numel; ++i) w[t.offset + i] = qk_norm ? 1.0f + bias(gen) : bias(gen);
    }
    w = round_bf16(w);
    bool clear = true;
    for (const auto& prompt : prompts) {
      std::vector<int32_t> fed = prompt;
      if (new_tokens > 1 && m.num_moe_experts > 0) {
        model::CpuDecoder cpu(m, w, decode_request(1, static_cast<int64_t>(prompt.size()), new_tokens));
        cpu.start({prompt});
        cpu.decode(new_tokens - 1);
        const auto tokens = cpu.generated()[0];
        fed.insert(fed.end(), tokens.begin(), tokens.end() - 1);  // the last token is sampled, never fed
      }
      clear = clear && routing_margin(m, w, fed) >= kRoutingMargin;
    }
    if (clear) return w;
  }
  ADD_FAILURE() << "no seed in 200 gives routing margins of " << kRoutingMargin;
  return {};
}

// The prompts of the GPU test's two greedy checks, the tokens each generates, and the seeds the search starts from.
inline const std::vector<int32_t> kSinglePrompt = {11, 502, 7, 999, 0, 350, 42, 42, 8, 17, 600};
inline constexpr int64_t kSingleNewTokens = 8;
inline constexpr uint64_t kSingleSeed = 21;
inline const std::vector<std::vector<int32_t>> kBatchPrompts = {
    {1, 2, 3}, {900, 800, 700, 600, 500, 400, 300, 17}, {5}};
inline constexpr int64_t kBatchNewTokens = 10;
inline constexpr uint64_t kBatchSeed = 22;
// B <= 8 prompts for the test of each STEPGRAPH_DECODE_GEMV mode: the first of 8 tokens (the prefill's calls fit the
// tensor-core math's rows too), prompt b its first b tokens. Prefixes, so that the routing the seed search clears is
// that of the 8 tokens, which 8 prompts of their own would rarely all give.
inline std::vector<std::vector<int32_t>> gemv_mode_prompts(int64_t B) {
  const std::vector<int32_t> longest = {402, 17, 963, 5, 250, 250, 781, 66};
  std::vector<std::vector<int32_t>> prompts = {longest};
  for (int64_t b = 1; b < B; ++b) prompts.emplace_back(longest.begin(), longest.begin() + b);
  return prompts;
}
inline constexpr uint64_t kGemvModesSeed = 24;

}  // namespace sg::test::decoder_kinds
