#include "config/model_config.h"

#include <algorithm>

#include "core/error.h"
#include "core/strings.h"
#include "config/moe_layer_freq.h"
#include "model/activation_account.h"
#include "model/recompute.h"
#include "model/stack.h"

namespace sg::config {

namespace {
bool stack_is_gpt(const ModelConfig& m) { return m.hybrid_override_pattern.value_or("").empty(); }
}  // namespace

int64_t resolved_ffn_hidden_size(const ModelConfig& m) { return m.ffn_hidden_size.value_or(4 * m.hidden_size); }

int64_t resolved_num_query_groups(const ModelConfig& m) { return m.num_query_groups.value_or(m.num_attention_heads); }

int64_t resolved_moe_ffn_hidden_size(const ModelConfig& m) {
  return m.num_moe_experts.value_or(0) > 0 ? m.moe_ffn_hidden_size.value_or(resolved_ffn_hidden_size(m)) : 0;
}

int64_t resolved_rotary_dim(const ModelConfig& m) {
  if (m.rotary_percent == 1.0 || m.num_attention_heads <= 0) return 0;
  const int64_t head_dim = m.kv_channels.value_or(m.hidden_size / m.num_attention_heads);
  return model::ModelSpec::rotary_dims_of_share(head_dim, m.rotary_percent);
}

std::string resolved_position_embedding_type(const ModelConfig& m) {
  return m.position_embedding_type.value_or(stack_is_gpt(m) ? "rope" : "none");
}

std::string resolved_activation_func(const ModelConfig& m) {
  if (m.activation_func == "relu2") return "squared_relu";
  if (m.activation_func == "torch.nn.functional.silu") return "silu";
  return m.activation_func;
}

// Megatron's values (megatron/core/transformer/transformer_config.py, models/gpt/gpt_model.py) next to stepgraph's.
const KeyValues& moe_router_score_function_values() {
  static const KeyValues values{.key = "model.moe_router_score_function",
                                .implemented = {"softmax", "sigmoid", "sqrtsoftplus"},
                                .megatron_only = {}};
  return values;
}
const KeyValues& moe_router_load_balancing_type_values() {
  static const KeyValues values{.key = "model.moe_router_load_balancing_type",
                                .implemented = {"aux_loss", "seq_aux_loss", "none"},
                                .megatron_only = {"global_aux_loss", "sinkhorn", "quantile_balancing"}};
  return values;
}
const KeyValues& moe_token_drop_policy_values() {
  static const KeyValues values{
      .key = "model.moe_token_drop_policy", .implemented = {"probs", "position"}, .megatron_only = {}};
  return values;
}
// On one GPU (expert_model_parallel_size 1) every dispatcher is the same local permutation.
const KeyValues& moe_token_dispatcher_type_values() {
  static const KeyValues values{.key = "model.moe_token_dispatcher_type",
                                .implemented = {"allgather", "alltoall", "flex"},
                                .megatron_only = {}};
  return values;
}
const KeyValues& position_embedding_type_values() {
  static const KeyValues values{.key = "model.position_embedding_type",
                                .implemented = {"rope", "none"},
                                .megatron_only = {"learned_absolute", "mrope", "yarn", "relative"}};
  return values;
}

std::vector<std::string> changed_model_keys(const Config& config, std::string_view prefix) {
  const Config defaults;
  const std::string start = "model." + std::string(prefix);
  std::vector<std::string> keys;
  for (const std::string& key : config_keys()) {
    if (key.rfind(start, 0) != 0) continue;
    // Bridge's keys that change nothing here (config/bridge_inert_keys.h) have a note of their own.
    if (find_bridge_inert_key("model", std::string_view(key).substr(std::string_view("model.").size()))) continue;
    if (format_value(config, key) != format_value(defaults, key)) keys.push_back(key);
  }
  return keys;
}

std::optional<model::RecomputeGranularity> recompute_granularity(const ModelConfig& m) {
  if (m.recompute_granularity.value_or("").empty()) return model::RecomputeGranularity::none;
  return model::find_recompute_granularity(*m.recompute_granularity);
}

model::MoeSpec moe_spec(const Config& config) {
  const ModelConfig& m = config.model;
  model::MoeSpec moe;
  // The position of `value` among the implemented values: the model layer's enum.
  const auto pick = [](const KeyValues& values, const std::string& value) {
    const std::vector<std::string>& valid = values.implemented;
    for (size_t i = 0; i < valid.size(); ++i) {
      if (value == valid[i]) return i;
    }
    throw ConfigError(
        strprintf("%s = %s: must be one of %s", values.key, value.c_str(), join(valid, ", ").c_str()));
  };
  // In moe_router_score_function_values()'s order.
  constexpr ref::MoeScoreFunction kScoreFunctions[] = {ref::MoeScoreFunction::softmax, ref::MoeScoreFunction::sigmoid,
                                                       ref::MoeScoreFunction::sqrtsoftplus};
  moe.score_function = kScoreFunctions[pick(moe_router_score_function_values(), m.moe_router_score_function)];
  // Megatron ignores pre_softmax with sigmoid (Bridge's DeepSeek-V3 providers set both); the router refuses the pair.
  moe.pre_softmax = m.moe_router_pre_softmax && moe.score_function == ref::MoeScoreFunction::softmax;
  moe.topk_scaling_factor = m.moe_router_topk_scaling_factor.value_or(1.0);
  moe.load_balancing = static_cast<model::MoeLoadBalancing>(
      pick(moe_router_load_balancing_type_values(), m.moe_router_load_balancing_type));
  moe.aux_loss_coeff = moe.load_balancing == model::MoeLoadBalancing::none ? 0.0 : m.moe_aux_loss_coeff;
  moe.z_loss_coeff = m.moe_z_loss_coeff.value_or(0.0);
  moe.enable_expert_bias = m.moe_router_enable_expert_bias;
  moe.bias_update_rate = m.moe_router_bias_update_rate;
  moe.capacity_factor = m.moe_expert_capacity_factor.value_or(0.0);
  moe.pad_to_capacity = m.moe_pad_expert_input_to_capacity;
  moe.drop_policy = pick(moe_token_drop_policy_values(), m.moe_token_drop_policy) == 0
                        ? ref::MoeDropPolicy::probs
                        : ref::MoeDropPolicy::position;
  moe.shared_expert_intermediate_size = m.moe_shared_expert_intermediate_size.value_or(0);
  // Megatron builds the gate only with a shared expert (validate notes the key otherwise).
  moe.shared_expert_gate = m.moe_shared_expert_gate && moe.shared_expert_intermediate_size > 0;
  if (stack_is_gpt(m)) {
    moe.layer_freq = expand_moe_layer_freq(m.moe_layer_freq, m.num_layers);
    bool all = true;
    for (int b : moe.layer_freq) all = all && b != 0;
    if (all) moe.layer_freq.clear();  // every block: the plain GPT MoE layout
  }
  return moe;
}

model::ModelSpec model_spec(const Config& config) {
  const ModelConfig& m = config.model;
  model::ModelSpec spec;
  spec.vocab_size = m.vocab_size.value_or(0);
  spec.num_layers = m.num_layers;
  spec.hybrid_layer_pattern = m.hybrid_override_pattern.value_or("");
  spec.is_hybrid_model = m.is_hybrid_model;
  spec.hidden_size = m.hidden_size;
  spec.ffn_hidden_size = resolved_ffn_hidden_size(m);
  spec.num_attention_heads = m.num_attention_heads;
  spec.num_query_groups = resolved_num_query_groups(m);
  spec.kv_channels = m.kv_channels.value_or(0);
  spec.seq_length = m.seq_length;
  spec.rotary_base = m.rotary_base;
  // Megatron's apply_rope_scaling: the factor is a key, the rest are the Llama 3.x release constants.
  spec.rope_scaling.factor = m.rope_scaling ? m.rope_scaling_factor : 0.0;
  spec.rotary_dim = resolved_rotary_dim(m);
  spec.longrope.short_factor.assign(m.longrope_short_factor.begin(), m.longrope_short_factor.end());
  spec.longrope.long_factor.assign(m.longrope_long_factor.begin(), m.longrope_long_factor.end());
  spec.longrope.original_max_position_embeddings = m.longrope_original_max_position_embeddings;
  spec.longrope.attention_factor = m.longrope_attention_factor;
  // A step's sequences are seq_length long: transformers' list for that length.
  if (spec.longrope.enabled()) spec.rope_scaling = spec.longrope.scaling_for(spec.seq_length);
  spec.layernorm_epsilon = m.layernorm_epsilon;
  spec.qk_layernorm = m.qk_layernorm;
  spec.add_qkv_bias = m.add_qkv_bias;
  spec.add_bias_linear = m.add_bias_linear;
  spec.share_embeddings_and_output_weights = m.share_embeddings_and_output_weights;
  spec.init_method_std = m.init_method_std;
  spec.attention_dropout = static_cast<float>(m.attention_dropout);
  spec.hidden_dropout = static_cast<float>(m.hidden_dropout);
  spec.num_moe_experts = m.num_moe_experts.value_or(0);
  spec.moe_router_topk = m.moe_router_topk;
  spec.moe_ffn_hidden_size = resolved_moe_ffn_hidden_size(m);
  spec.position_embedding = resolved_position_embedding_type(m) == "none" ? model::PositionEmbedding::none
                                                                           : model::PositionEmbedding::rope;
  spec.mlp_activation =
      resolved_activation_func(m) == "squared_relu" ? model::MlpActivation::squared_relu : model::MlpActivation::swiglu;
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
  if (spec.num_moe_experts > 0) spec.moe = moe_spec(config);
  spec.recompute = recompute_spec(config);
  return spec;
}

model::RecomputeSpec recompute_spec(const Config& config) {
  const ModelConfig& m = config.model;
  model::RecomputeSpec r;
  r.granularity = recompute_granularity(m).value_or(model::RecomputeGranularity::none);
  if (r.granularity == model::RecomputeGranularity::selective) {
    for (const std::string& name : m.recompute_modules) {
      if (const auto module = model::find_recompute_module(name)) r.modules.push_back(*module);
    }
  } else if (r.granularity == model::RecomputeGranularity::full) {
    const model::FullRecomputeDefaults defaults = model::full_recompute_defaults();
    r.method = model::find_recompute_method(m.recompute_method.value_or("")).value_or(defaults.method);
    r.num_layers = m.recompute_num_layers.value_or(defaults.num_layers);
  }
  return r;
}

std::vector<std::string> describe_activations(const Config& config) {
  try {
    if (config.train.micro_batch_size.value_or(0) <= 0) return {};
    const model::ModelSpec spec = model_spec(config);
    return model::describe_activations(spec, model::activation_account(spec, batch_spec(config)));
  } catch (const Error&) {
    return {};
  }
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
  // Only what the GPT layout's kinds depend on (the other MoE keys are validated apart).
  model::ModelSpec spec;
  spec.num_layers = m.num_layers;
  spec.num_moe_experts = m.num_moe_experts.value_or(0);
  if (spec.num_moe_experts > 0) spec.moe.layer_freq = expand_moe_layer_freq(m.moe_layer_freq, m.num_layers);
  return model::stack_layer_kinds(spec);
}

bool has_layer_kind(const Config& config, model::LayerKind kind, int64_t max_layers) {
  const ModelConfig& m = config.model;
  if (m.hybrid_override_pattern) {
    return m.hybrid_override_pattern->find(model::layer_kind_letter(kind)) != std::string::npos;
  }
  if (m.num_layers < 1) return false;  // no stack (reported)
  if (m.num_layers <= max_layers) {
    try {
      const std::vector<model::LayerKind> kinds = layer_pattern(config);
      return std::find(kinds.begin(), kinds.end(), kind) != kinds.end();
    } catch (const ConfigError&) {
      // a bad moe_layer_freq (reported by validation): below, as if every block could have the kind
    }
  }
  // Any block may be dense or MoE: the kinds of one of each, as the model layer composes GPT blocks.
  model::ModelSpec blocks;
  blocks.num_layers = 2;
  if (m.num_moe_experts.value_or(0) > 0) {
    blocks.num_moe_experts = *m.num_moe_experts;
    blocks.moe.layer_freq = {0, 1};
  }
  const std::vector<model::LayerKind> kinds = model::stack_layer_kinds(blocks);
  return std::find(kinds.begin(), kinds.end(), kind) != kinds.end();
}

std::string describe_layers(const Config& config) {
  try {
    return model::describe_stack(model_spec(config));
  } catch (const Error&) {
    return {};
  }
}

std::vector<std::string> describe_derived_shapes(const Config& config) {
  const ModelConfig& m = config.model;
  if (m.mamba_num_heads || describe_layers(config).empty()) return {};
  const std::vector<model::LayerKind> pattern = layer_pattern(config);
  if (std::find(pattern.begin(), pattern.end(), model::LayerKind::mamba) == pattern.end()) return {};
  const long long heads = model_spec(config).mamba_heads();
  return {
      strprintf("model.mamba_num_heads: null = mamba_expand x hidden_size / mamba_head_dim = %lld x %lld / %lld = "
                "%lld heads",
                static_cast<long long>(m.mamba_expand), static_cast<long long>(m.hidden_size),
                static_cast<long long>(m.mamba_head_dim), heads)};
}

}  // namespace sg::config
