#pragma once
// Config (Megatron-Bridge keys) -> the model layer's ModelSpec / BatchSpec and per-layer pattern.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "config/config.h"
#include "kernels/shape_limits.h"
#include "model/layer_kind.h"
#include "model/recompute_spec.h"
#include "model/spec.h"

namespace sg::config {

// Bridge's meaning of unset model keys, written once: validation writes them into the config (so `config show`
// prints what runs) and model_spec reads them.
int64_t resolved_ffn_hidden_size(const ModelConfig& m);     // ffn_hidden_size, else 4 * hidden_size
int64_t resolved_num_query_groups(const ModelConfig& m);    // num_query_groups, else num_attention_heads
int64_t resolved_moe_ffn_hidden_size(const ModelConfig& m);  // moe_ffn_hidden_size, else the above; 0 without MoE
// The dimensions RoPE rotates at the start of each head, as Megatron counts them: int(head_dim x rotary_percent)
// (head_dim: kv_channels, else hidden_size / num_attention_heads); 0 for the whole head (rotary_percent 1).
int64_t resolved_rotary_dim(const ModelConfig& m);
// position_embedding_type, else rope (none with a hybrid pattern, as Megatron's Mamba models have).
std::string resolved_position_embedding_type(const ModelConfig& m);
// model.activation_func by its canonical name: Bridge's aliases (activation_map.py) relu2 for squared_relu and the
// fully qualified torch.nn.functional.silu for silu are the same functions. Other names are returned as written.
std::string resolved_activation_func(const ModelConfig& m);

// A model key that names one of a fixed set of values: the ones stepgraph implements (moe_spec maps them to the
// model layer's enums by position) and Megatron's others, which validation calls "not implemented in stepgraph"
// rather than unknown. The one list of each.
struct KeyValues {
  const char* key;                         // "model.moe_router_score_function"
  std::vector<std::string> implemented;    // "softmax", "sigmoid"
  std::vector<std::string> megatron_only;  // "sqrtsoftplus"
};
const KeyValues& moe_router_score_function_values();
const KeyValues& moe_router_load_balancing_type_values();
const KeyValues& moe_token_drop_policy_values();
const KeyValues& moe_token_dispatcher_type_values();
const KeyValues& position_embedding_type_values();

// The keys model.<prefix>* ("moe_", "mamba_") whose values differ from Config's defaults, in the key table's order
// (Bridge's keys without effect, config/bridge_inert_keys.h, left out: their own note names them).
std::vector<std::string> changed_model_keys(const Config& config, std::string_view prefix);

// model.recompute_granularity as the model layer's enum: none when unset (or empty), nullopt for a name
// Megatron does not have (validation reports it).
std::optional<model::RecomputeGranularity> recompute_granularity(const ModelConfig& m);

// Shapes of the model, unset optional keys resolved as above. Expects a config that validate() accepted.
model::ModelSpec model_spec(const Config& config);
// Its MoE options (Megatron's moe_* keys; moe_router_pre_softmax only with softmax, as Megatron reads it). Throws
// ConfigError for a value not implemented.
model::MoeSpec moe_spec(const Config& config);

// model.recompute_* as the model layer's RecomputeSpec (names it does not know are skipped:
// validation reports them).
model::RecomputeSpec recompute_spec(const Config& config);

// Activation bytes per microbatch and per layer, with and without recompute, computed without a GPU
// (model/activation_account.h); empty when the config does not describe a model the engine builds.
std::vector<std::string> describe_activations(const Config& config);

// One rank's batch: micro_batch_size, data_parallel_size = config.data_parallel_size and
// num_microbatches = global_batch_size / (micro_batch_size x data_parallel_size).
model::BatchSpec batch_spec(const Config& config);

// The layer sequence (model/stack.h): one entry per character of hybrid_override_pattern (M mamba,
// * attention, - mlp, E moe), or, without a pattern, num_layers blocks of attention followed by an MLP
// (MoE when num_moe_experts > 0). Throws ConfigError for a character outside M*-E.
std::vector<model::LayerKind> layer_pattern(const Config& config);

// The most layers validation accepts (model.num_layers): the training step reduces the weight gradients of its
// num_layers + 1 RMSNorms (each layer's pre-norm, the final norm) in one batched launch of at most
// kernels::kMaxBatchedColumnSums matrices (model/train_step_run.cpp).
inline constexpr int64_t kMaxLayers = kernels::kMaxBatchedColumnSums - 1;

// Whether the stack has layers of `kind`: the hybrid pattern's letters (an unknown letter is validation's error),
// else the GPT layout's blocks; when those cannot be listed (a malformed moe_layer_freq, more than max_layers),
// whether any block could have the kind.
bool has_layer_kind(const Config& config, model::LayerKind kind, int64_t max_layers);

// The layer stack as `config show`, `validate` and the start of a run print it (model/stack.h):
// "8 layers: (*-)x4 as 4 GPT blocks", "6 layers: (M*-)x2 (hybrid pattern)"; empty when the config
// does not describe a valid stack (validation says why).
std::string describe_layers(const Config& config);

// The shapes that a null key leaves to a formula, as `config show` prints them beside the YAML (the YAML keeps
// the null, which the checkpoint's config hash reads): "model.mamba_num_heads: null = mamba_expand x
// hidden_size / mamba_head_dim = 2 x 256 / 64 = 8". Empty when nothing is derived or the config does not
// describe a valid stack.
std::vector<std::string> describe_derived_shapes(const Config& config);

}  // namespace sg::config
