#pragma once
// Logits of one whole sequence recomputed from scratch with the training step's CPU twins (model/layer.h:
// causal attention over the full sequence, the chunk-free SSD scan from a zero state, the MoE layer's
// permute / grouped experts / combine), dropout off, so the decoders (KV caches, kept Mamba states,
// per-row routing) are checked against a computation that shares none of their layer code.
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "model/decoder.h"
#include "model/layer_registry.h"
#include "model/spec.h"
#include "reference/embedding.h"
#include "reference/linear.h"
#include "reference/rmsnorm.h"

namespace sg::test {

// [tokens.size(), vocab_size] fp32 logits of every position.
inline std::vector<float> full_sequence_logits(const model::ModelSpec& spec, const std::vector<float>& weights,
                                               const std::vector<int32_t>& tokens) {
  model::ModelSpec m = spec;
  m.seq_length = static_cast<int64_t>(tokens.size());  // one microbatch of the whole sequence
  std::vector<std::unique_ptr<model::CpuLayer>> layers = model::make_cpu_layers(m);
  const model::ModelLayout layout =
      model::declare_model(m, [&](size_t i, model::LayerDeclarations& d) { layers[i]->declare(d); });
  for (auto& layer : layers) layer->plan(m, model::BatchSpec{.micro_batch_size = 1});
  const int64_t S = m.seq_length, H = m.hidden_size, V = m.vocab_size;
  const float eps = static_cast<float>(m.layernorm_epsilon);
  const auto w = [&](model::ParamRef ref) { return weights.data() + layout.offset(ref); };
  std::vector<float> x(S * H), n(S * H), rstd(S), delta(S * H), logits(S * V);
  ref::embedding_forward(x.data(), tokens.data(), w(layout.embedding), S, H);
  for (size_t i = 0; i < layers.size(); ++i) {
    ref::rmsnorm_forward(n.data(), rstd.data(), x.data(), w(layout.norm_before(static_cast<int64_t>(i))), S, H, eps);
    layers[i]->forward(
        {.layout = layout, .weights = weights.data(), .input = n.data(), .output = delta.data(), .dropout = false});
    for (int64_t j = 0; j < S * H; ++j) x[j] += delta[j];
  }
  ref::rmsnorm_forward(n.data(), rstd.data(), x.data(), w(layout.final_norm), S, H, eps);
  ref::linear_forward(logits.data(), n.data(), w(layout.lm_head), S, H, V);
  return logits;
}

// The last row's argmax (lowest id on ties).
inline int32_t argmax_last_row(const std::vector<float>& logits, int64_t V) {
  const float* row = logits.data() + logits.size() - V;
  int32_t best = 0;
  for (int64_t j = 1; j < V; ++j) {
    if (row[j] > row[best]) best = static_cast<int32_t>(j);
  }
  return best;
}

// A small dense Llama whose weights give peaked logits (std 0.4 instead of 0.02), so greedy choices are
// far from ties: V=64, H=32, 2 layers, 4 heads in 2 KV groups, F=48.
inline model::ModelSpec decoder_test_spec() {
  model::ModelSpec s;
  s.vocab_size = 64;
  s.hidden_size = 32;
  s.num_layers = 2;
  s.num_attention_heads = 4;
  s.num_query_groups = 2;
  s.ffn_hidden_size = 48;
  s.seq_length = 128;
  s.init_method_std = 0.4;
  return s;
}

// A decoding request: `batch` prompts of at most max_prompt tokens, max_new tokens each; `gemv`: the GPU decoder's
// linears (none: the process's STEPGRAPH_DECODE_GEMV).
inline model::DecodeSpec decode_request(int64_t batch, int64_t max_prompt, int64_t max_new, float temperature = 0.0f,
                                        int64_t top_k = 0, uint64_t seed = 1,
                                        std::optional<model::DecodeGemv> gemv = std::nullopt) {
  return {.batch = batch,
          .max_prompt_tokens = max_prompt,
          .max_new_tokens = max_new,
          .sampling = {.temperature = temperature, .top_k = top_k, .top_p = 1.0f, .seed = seed},
          .sample_vocab = 0,
          .gemv = gemv};
}

}  // namespace sg::test
