#pragma once
// The tiny dense Llama and batches shared by the model tests (CPU and GPU).
#include <cstdint>
#include <random>

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
