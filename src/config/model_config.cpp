#include "config/model_config.h"

#include <algorithm>

#include "core/strings.h"

namespace sg::config {

model::ModelSpec model_spec(const Config& config) {
  const ModelConfig& m = config.model;
  model::ModelSpec spec;
  spec.vocab_size = m.vocab_size.value_or(0);
  spec.num_layers = m.num_layers;
  spec.hidden_size = m.hidden_size;
  spec.ffn_hidden_size = m.ffn_hidden_size.value_or(4 * m.hidden_size);
  spec.num_attention_heads = m.num_attention_heads;
  spec.num_query_groups = m.num_query_groups.value_or(m.num_attention_heads);
  spec.seq_length = m.seq_length;
  spec.rotary_base = m.rotary_base;
  // Megatron's apply_rope_scaling: the factor is a key, the rest are the Llama 3.x release constants.
  spec.rope_scaling.factor = m.rope_scaling ? m.rope_scaling_factor : 0.0;
  spec.layernorm_epsilon = m.layernorm_epsilon;
  spec.share_embeddings_and_output_weights = m.share_embeddings_and_output_weights;
  spec.init_method_std = m.init_method_std;
  spec.attention_dropout = static_cast<float>(m.attention_dropout);
  spec.hidden_dropout = static_cast<float>(m.hidden_dropout);
  spec.num_moe_experts = m.num_moe_experts.value_or(0);
  spec.moe_router_topk = m.moe_router_topk;
  spec.moe_ffn_hidden_size =
      spec.num_moe_experts > 0 ? m.moe_ffn_hidden_size.value_or(spec.ffn_hidden_size) : 0;
  return spec;
}

model::BatchSpec batch_spec(const Config& config) {
  model::BatchSpec batch;
  batch.micro_batch_size = config.train.micro_batch_size.value_or(0);
  batch.data_parallel_size = std::max<int64_t>(1, config.data_parallel_size);
  const int64_t per_rank = batch.micro_batch_size * batch.data_parallel_size;
  const int64_t global = config.train.global_batch_size.value_or(per_rank);
  batch.num_microbatches = per_rank > 0 ? global / per_rank : 0;
  return batch;
}

std::vector<model::LayerKind> layer_pattern(const Config& config) {
  using model::LayerKind;
  const ModelConfig& m = config.model;
  std::vector<LayerKind> layers;
  const std::string pattern = m.hybrid_override_pattern.value_or("");
  if (!pattern.empty()) {
    for (size_t i = 0; i < pattern.size(); ++i) {
      switch (pattern[i]) {
        case 'M':
          layers.push_back(LayerKind::mamba);
          break;
        case '*':
          layers.push_back(LayerKind::attention);
          break;
        case '-':
          layers.push_back(LayerKind::mlp);
          break;
        case 'E':
          layers.push_back(LayerKind::moe);
          break;
        default:
          throw ConfigError(strprintf(
              "model.hybrid_override_pattern = %s: character %zu '%c' is not one of M (Mamba), "
              "* (attention), - (MLP), E (MoE)",
              pattern.c_str(), i + 1, pattern[i]));
      }
    }
    return layers;
  }
  const bool moe = m.num_moe_experts.value_or(0) > 0;
  for (int64_t i = 0; i < m.num_layers; ++i) {
    layers.push_back(LayerKind::attention);
    layers.push_back(moe ? LayerKind::moe : LayerKind::mlp);
  }
  return layers;
}

const char* layer_kind_name(model::LayerKind kind) {
  switch (kind) {
    case model::LayerKind::attention:
      return "attention";
    case model::LayerKind::mlp:
      return "mlp";
    case model::LayerKind::moe:
      return "moe";
    case model::LayerKind::mamba:
      return "mamba";
  }
  return "?";
}

}  // namespace sg::config
