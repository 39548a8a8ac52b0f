#pragma once
// Tiny Hugging Face Llama tensor lists for the checkpoint tests, built here (not from src/model) so
// the checkpoint code is tested through its generic API. Values follow a pattern that
// tests/checkpoint/safetensors_read.py recomputes: value(name, j) = ((7 j + len(name)) % 13) * 0.25
// - 1.5.
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "model/spec.h"
#include "test_dir.h"
#include "checkpoint/checkpoint_dir.h"
#include "checkpoint/hf_config.h"

namespace sg::test {

inline model::ModelSpec tiny_llama_spec(bool tied = false) {
  model::ModelSpec s;
  s.vocab_size = 256;
  s.num_layers = 2;
  s.hidden_size = 32;
  s.ffn_hidden_size = 64;
  s.num_attention_heads = 4;
  s.num_query_groups = 2;
  s.seq_length = 64;
  s.share_embeddings_and_output_weights = tied;
  return s;
}

// Hugging Face LlamaForCausalLM parameter names and shapes.
inline std::vector<std::pair<std::string, std::vector<int64_t>>> hf_llama_shapes(
    const model::ModelSpec& s) {
  const int64_t H = s.hidden_size, F = s.ffn_hidden_size, V = s.vocab_size;
  const int64_t Q = s.num_attention_heads * s.head_dim(), KV = s.kv_dim();
  std::vector<std::pair<std::string, std::vector<int64_t>>> out;
  out.push_back({"model.embed_tokens.weight", {V, H}});
  for (int64_t l = 0; l < s.num_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    out.push_back({p + "input_layernorm.weight", {H}});
    out.push_back({p + "self_attn.q_proj.weight", {Q, H}});
    out.push_back({p + "self_attn.k_proj.weight", {KV, H}});
    out.push_back({p + "self_attn.v_proj.weight", {KV, H}});
    out.push_back({p + "self_attn.o_proj.weight", {H, Q}});
    out.push_back({p + "post_attention_layernorm.weight", {H}});
    out.push_back({p + "mlp.gate_proj.weight", {F, H}});
    out.push_back({p + "mlp.up_proj.weight", {F, H}});
    out.push_back({p + "mlp.down_proj.weight", {H, F}});
  }
  out.push_back({"model.norm.weight", {H}});
  if (!s.share_embeddings_and_output_weights) out.push_back({"lm_head.weight", {V, H}});
  return out;
}

inline float pattern_value(const std::string& name, int64_t j) {
  return static_cast<float>(((7 * j + static_cast<int64_t>(name.size())) % 13) * 0.25 - 1.5);
}

inline uint16_t bf16_bits(float f) {  // exact for the pattern's values (multiples of 0.25)
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return static_cast<uint16_t>(u >> 16);
}

// Host storage for a list of named tensors; refs()/dests() give the generic API's views.
struct HostTensors {
  std::vector<std::string> names;
  std::vector<std::vector<int64_t>> shapes;
  std::vector<std::vector<uint8_t>> bytes;
  checkpoint::TensorDtype dtype = checkpoint::TensorDtype::F32;

  std::vector<checkpoint::TensorRef> refs() const {
    std::vector<checkpoint::TensorRef> r;
    for (size_t i = 0; i < names.size(); ++i)
      r.push_back({names[i], dtype, shapes[i], bytes[i].data()});
    return r;
  }
  std::vector<checkpoint::TensorDest> dests() {
    std::vector<checkpoint::TensorDest> d;
    for (size_t i = 0; i < names.size(); ++i)
      d.push_back({names[i], dtype, shapes[i], bytes[i].data()});
    return d;
  }
  void fill(uint8_t byte) {
    for (auto& b : bytes) std::fill(b.begin(), b.end(), byte);
  }
};

// The tiny Llama's tensors, pattern-filled (plus `salt` added to every float, so the optimizer
// files differ from the model file), in `dtype` (F32 or BF16).
inline HostTensors tiny_llama_tensors(
    const model::ModelSpec& spec,
    checkpoint::TensorDtype dtype = checkpoint::TensorDtype::F32, float salt = 0.0f) {
  HostTensors t;
  t.dtype = dtype;
  for (const auto& [name, shape] : hf_llama_shapes(spec)) {
    int64_t n = 1;
    for (const int64_t d : shape) n *= d;
    std::vector<uint8_t> b(static_cast<size_t>(n) * checkpoint::dtype_size(dtype));
    for (int64_t j = 0; j < n; ++j) {
      const float v = pattern_value(name, j) + salt;
      if (dtype == checkpoint::TensorDtype::BF16) {
        const uint16_t h = bf16_bits(v);
        std::memcpy(b.data() + 2 * j, &h, 2);
      } else {
        std::memcpy(b.data() + 4 * j, &v, 4);
      }
    }
    t.names.push_back(name);
    t.shapes.push_back(shape);
    t.bytes.push_back(std::move(b));
  }
  return t;
}

// A training checkpoint of the tiny Llama whose values depend on `iteration`, optionally with one
// large extra tensor (so a save takes long enough to be interrupted inside a file).
struct Fixture {
  HostTensors model, main_params, exp_avg, exp_avg_sq;
  std::vector<float> big;
  checkpoint::TrainState state;

  explicit Fixture(int64_t iteration, size_t big_floats = 0) {
    const auto spec = tiny_llama_spec();
    const float salt = static_cast<float>(iteration);
    model = tiny_llama_tensors(spec, checkpoint::TensorDtype::BF16, salt);
    main_params = tiny_llama_tensors(spec, checkpoint::TensorDtype::F32, salt);
    exp_avg = tiny_llama_tensors(spec, checkpoint::TensorDtype::F32, salt + 0.5f);
    exp_avg_sq = tiny_llama_tensors(spec, checkpoint::TensorDtype::F32, salt + 0.75f);
    big.assign(big_floats, salt);
    state.iteration = iteration;
    state.data_position = {static_cast<uint64_t>(iteration) * 8,
                           {static_cast<uint64_t>(iteration) * 8}};
    state.rng_state = {1, 2, 3, static_cast<uint8_t>(iteration)};
    state.config_hash = checkpoint::config_hash_hex("tiny");
  }

  checkpoint::CheckpointContents contents() const {
    checkpoint::TrainingCheckpoint c;
    c.model = model.refs();
    c.model_config = checkpoint::hf_llama_config(tiny_llama_spec(), "bfloat16");
    c.main_params = main_params.refs();
    c.exp_avg = exp_avg.refs();
    c.exp_avg_sq = exp_avg_sq.refs();
    if (!big.empty())
      c.main_params.push_back(
          {"zz.big", checkpoint::TensorDtype::F32, {static_cast<int64_t>(big.size())}, big.data()});
    c.state = state;
    return checkpoint::training_checkpoint_contents(c);
  }
};

}  // namespace sg::test
