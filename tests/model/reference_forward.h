#pragma once
// Logits of one whole sequence recomputed from scratch with the training-side CPU twins — causal
// attention over the full sequence (reference/attention.h), RoPE at t % S — so the decoders (KV cache,
// per-row positions) are checked against a computation that shares none of their code paths. Offsets
// come from the layout by Hugging Face name.
#include <cstdint>
#include <string>
#include <vector>

#include "core/strings.h"
#include "model/decoder.h"
#include "model/layer_registry.h"
#include "model/spec.h"
#include "reference/attention.h"
#include "reference/embedding.h"
#include "reference/linear.h"
#include "reference/rmsnorm.h"
#include "reference/rope.h"
#include "reference/swiglu.h"

namespace sg::test {

// [tokens.size(), vocab_size] fp32 logits of every position.
inline std::vector<float> full_sequence_logits(const model::ModelSpec& m, const std::vector<float>& weights,
                                               const std::vector<int32_t>& tokens) {
  const model::ModelLayout layout = model::model_layout(m);
  auto w = [&](const std::string& name) { return weights.data() + layout.find(name).offset; };
  const auto S = static_cast<int64_t>(tokens.size());
  const int64_t H = m.hidden_size, F = m.ffn_hidden_size, QKV = m.qkv_dim(), V = m.vocab_size, d = m.head_dim();
  const float eps = static_cast<float>(m.layernorm_epsilon);
  std::vector<float> x(S * H), n(S * H), rstd(S), qkv(S * QKV), attn(S * H), lse(m.num_attention_heads * S);
  std::vector<float> o(S * H), h(S * H), gate_up(S * 2 * F), act(S * F), down(S * H), logits(S * V);
  ref::embedding_forward(x.data(), tokens.data(), w("model.embed_tokens.weight"), S, H);
  for (int64_t l = 0; l < m.num_layers; ++l) {
    const std::string p = strprintf("model.layers.%lld.", static_cast<long long>(l));
    ref::rmsnorm_forward(n.data(), rstd.data(), x.data(), w(p + "input_layernorm.weight"), S, H, eps);
    ref::linear_forward(qkv.data(), n.data(), w(p + "self_attn.q_proj.weight"), S, H, QKV);  // q|k|v rows
    ref::rope_forward(qkv.data(), S, S, m.num_attention_heads, d, QKV, m.rotary_base, m.rope_scaling);
    ref::rope_forward(qkv.data() + H, S, S, m.num_query_groups, d, QKV, m.rotary_base, m.rope_scaling);
    ref::attention_forward(attn.data(), lse.data(), qkv.data(), 1, S, m.num_attention_heads, m.num_query_groups, d,
                           0.0f, {}, 0);
    ref::linear_forward(o.data(), attn.data(), w(p + "self_attn.o_proj.weight"), S, H, H);
    for (int64_t i = 0; i < S * H; ++i) h[i] = x[i] + o[i];
    ref::rmsnorm_forward(n.data(), rstd.data(), h.data(), w(p + "post_attention_layernorm.weight"), S, H, eps);
    ref::linear_forward(gate_up.data(), n.data(), w(p + "mlp.gate_proj.weight"), S, H, 2 * F);  // gate|up rows
    ref::swiglu_forward(act.data(), gate_up.data(), S, F);
    ref::linear_forward(down.data(), act.data(), w(p + "mlp.down_proj.weight"), S, F, H);
    for (int64_t i = 0; i < S * H; ++i) x[i] = h[i] + down[i];
  }
  ref::rmsnorm_forward(n.data(), rstd.data(), x.data(), w("model.norm.weight"), S, H, eps);
  const char* head = m.share_embeddings_and_output_weights ? "model.embed_tokens.weight" : "lm_head.weight";
  ref::linear_forward(logits.data(), n.data(), w(head), S, H, V);
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

// A decoding request: `batch` prompts of at most max_prompt tokens, max_new tokens each.
inline model::DecodeSpec decode_request(int64_t batch, int64_t max_prompt, int64_t max_new, float temperature = 0.0f,
                                        int64_t top_k = 0, uint64_t seed = 1) {
  return {.batch = batch,
          .max_prompt_tokens = max_prompt,
          .max_new_tokens = max_new,
          .sampling = {.temperature = temperature, .top_k = top_k, .top_p = 1.0f, .seed = seed}};
}

}  // namespace sg::test
