#pragma once
// Config (Megatron-Bridge keys) -> the model layer's ModelSpec / BatchSpec and per-layer pattern.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "model/layer_kind.h"
#include "model/recompute_spec.h"
#include "model/spec.h"
#include "config/config.h"

namespace sg::config {

// Bridge's meaning of unset model keys, written once: validation writes them into the config (so `config show`
// prints what runs) and model_spec reads them.
int64_t resolved_ffn_hidden_size(const ModelConfig& m);     // ffn_hidden_size, else 4 * hidden_size
int64_t resolved_num_query_groups(const ModelConfig& m);    // num_query_groups, else num_attention_heads
int64_t resolved_moe_ffn_hidden_size(const ModelConfig& m);  // moe_ffn_hidden_size, else the above; 0 without MoE
// position_embedding_type, else rope (none with a hybrid pattern, as Megatron's Mamba models have).
std::string resolved_position_embedding_type(const ModelConfig& m);

// model.recompute_granularity as the model layer's enum: none when unset (or empty), nullopt for a name
// Megatron does not have (validation reports it).
std::optional<model::RecomputeGranularity> recompute_granularity(const ModelConfig& m);

// Shapes of the model, unset optional keys resolved as above. Expects a config that validate() accepted.
model::ModelSpec model_spec(const Config& config);
// Its MoE options (Megatron's moe_* keys). Throws ConfigError for an unknown value.
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

// The layer stack as `config show`, `validate` and the start of a run print it (model/stack.h):
// "8 layers: (*-)x4 as 4 GPT blocks", "6 layers: (M*-)x2 (hybrid pattern)"; empty when the config
// does not describe a valid stack (validation says why).
std::string describe_layers(const Config& config);

}  // namespace sg::config
