#pragma once
// The tiny dense Llama and batches shared by the model tests (CPU and GPU).
#include <cstdint>
#include <random>
#include <string>

#include "model/batch.h"
#include "model/spec.h"
#include "test_util.h"

namespace sg::test {

// V=32, H=16, L=2, 4 heads of 4 in 2 KV groups, F=24, S=8: every code path (GQA, tied or not, dropout)
// at a size where a full finite-difference check of every parameter takes seconds.
inline model::ModelSpec tiny_model_spec() {
  model::ModelSpec s;
  s.vocab_size = 32;
  s.hidden_size = 16;
  s.num_layers = 2;
  s.num_attention_heads = 4;
  s.num_query_groups = 2;
  s.ffn_hidden_size = 24;
  s.seq_length = 8;
  s.init_method_std = 0.02;
  return s;
}

// The tiny model with a hybrid pattern in Nemotron-H's style (attention without RoPE, squared-ReLU
// MLP) and a small Mamba mixer: 4 heads of 4, 2 groups of B and C with state 4 (the CPU twin runs any
// shape; the GPU scan needs head_dim 64: see the GPU tests). dt drawn in [0.05, 0.5] and A in -[1, 4],
// so the scan's decay and its gradients are far from vanishing at S = 8.
inline model::ModelSpec tiny_hybrid_spec(const std::string& pattern) {
  model::ModelSpec s = tiny_model_spec();
  s.hybrid_layer_pattern = pattern;
  s.num_layers = static_cast<int64_t>(pattern.size());
  s.position_embedding = model::PositionEmbedding::none;
  s.mlp_activation = model::MlpActivation::squared_relu;
  s.mamba.head_dim = 4;
  s.mamba.num_heads = 4;
  s.mamba.num_groups = 2;
  s.mamba.state_dim = 4;
  s.mamba.dt_min = 0.05;
  s.mamba.dt_max = 0.5;
  s.mamba.A_init_min = 1.0;
  s.mamba.A_init_max = 4.0;
  return s;
}

// `m` with Mixtral's MoE: every block's MLP is 4 SwiGLU experts of width 24, softmax top-2.
inline model::ModelSpec with_mixtral_experts(model::ModelSpec m) {
  m.num_moe_experts = 4;
  m.moe_router_topk = 2;
  m.moe_ffn_hidden_size = 24;
  return m;
}

// Whether tensor `name`'s gradient is zero in exact arithmetic: the key bias of an attention without RoPE adds the same
// q . b_k to every score of a query, which the softmax cancels. Its computed gradient is rounding noise, which no
// relative comparison can check; the tests check that it is small instead.
inline bool gradient_zero_by_symmetry(const model::ModelSpec& m, const std::string& name) {
  return m.position_embedding == model::PositionEmbedding::none && name.find("k_proj.bias") != std::string::npos;
}

// tokens/targets uniform in the vocabulary, loss_mask 1 except about one token in five.
inline model::HostBatch random_batch(const model::ModelSpec& m, const model::BatchSpec& b, uint64_t seed) {
  const size_t n = static_cast<size_t>(b.num_microbatches * b.tokens_per_microbatch(m));
  model::HostBatch batch;
  batch.tokens = random_tokens(n, static_cast<int32_t>(m.vocab_size), seed);
  batch.targets = random_tokens(n, static_cast<int32_t>(m.vocab_size), seed + 1);
  std::mt19937_64 gen(seed + 2);
  batch.loss_mask.resize(n);
  for (auto& x : batch.loss_mask) x = gen() % 5 == 0 ? 0.0f : 1.0f;
  return batch;
}

}  // namespace sg::test
