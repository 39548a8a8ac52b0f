#include "config/model_config.h"

#include <algorithm>

#include "core/error.h"
#include "core/strings.h"
#include "model/stack.h"

namespace sg::config {

model::ModelSpec model_spec(const Config& config) {
  const ModelConfig& m = config.model;
  model::ModelSpec spec;
  spec.vocab_size = m.vocab_size.value_or(0);
  spec.num_layers = m.num_layers;
  spec.hybrid_layer_pattern = m.hybrid_override_pattern.value_or("");
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
  spec.position_embedding =
      m.position_embedding_type.value_or(spec.hybrid_layer_pattern.empty() ? "rope" : "none") == "none"
          ? model::PositionEmbedding::none
          : model::PositionEmbedding::rope;
  spec.mlp_activation =
      m.activation_func == "squared_relu" ? model::MlpActivation::squared_relu : model::MlpActivation::swiglu;
  model::MambaSpec& mamba = spec.mamba;
  mamba.state_dim = m.mamba_state_dim;
  mamba.head_dim = m.mamba_head_dim;
  mamba.num_groups = m.mamba_num_groups;
  mamba.num_heads = m.mamba_num_heads.value_or(0);
  mamba.expand = m.mamba_expand;
  mamba.conv_kernel = m.mamba_conv_kernel;
  mamba.chunk_size = m.mamba_chunk_size;
  mamba.dt_min = m.mamba_dt_min;
  mamba.dt_max = m.mamba_dt_max;
  mamba.dt_init_floor = m.mamba_dt_init_floor;
  mamba.dt_limit_min = m.mamba_dt_limit_min;
  if (m.mamba_dt_limit_max) mamba.dt_limit_max = *m.mamba_dt_limit_max;
  mamba.A_init_min = m.mamba_A_init_min;
  mamba.A_init_max = m.mamba_A_init_max;
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
  const ModelConfig& m = config.model;
  if (!m.hybrid_override_pattern.value_or("").empty()) {
    try {
      return model::parse_layer_pattern(*m.hybrid_override_pattern);
    } catch (const ConfigError&) {
      throw;
    } catch (const Error& e) {
      throw ConfigError(e.what());
    }
  }
  if (m.num_layers <= 0) return {};  // reported by validation (rule 16)
  return model::stack_layer_kinds(model_spec(config));
}

std::string describe_layers(const Config& config) {
  try {
    return model::describe_stack(model_spec(config));
  } catch (const Error&) {
    return {};
  }
}

}  // namespace sg::config
