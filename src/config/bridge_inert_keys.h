#pragma once
// Megatron-Bridge keys stepgraph accepts without implementing them: the one table of them. Bridge's recipes
// (Qwen3-MoE, NemotronH, the logger's W&B keys) set them, and each has values that change nothing here
// (moe_grouped_gemm: the experts always run as grouped GEMMs). Such a key loads from YAML and overrides with its
// value kept as written, prints in `config show` only when set (a config without them emits, and hashes, as
// before), and validate() notes the neutral values and refuses the others with the fix
// (bridge_inert_keys.cpp). docs/configuration.md's "Megatron-Bridge keys accepted without effect" lists them
// (tests/config/bridge_inert_keys_test.cpp holds the two together).
#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sg::config {

struct Config;
struct Violation;
struct Note;

// Which written values of a key change nothing in stepgraph. Unset (null) always changes nothing.
enum class InertValues : uint8_t {
  any,       // every value: a kernel, schedule, communication or logging choice
  any_bool,  // true or false
  listed,    // BridgeInertKey::neutral's values (numbers compare as numbers, YAML booleans as booleans)
};

struct BridgeInertKey {
  const char* section;
  const char* key;
  InertValues accepts;
  const char* neutral;  // with `listed`: the neutral values, comma-separated; "": only unset
  const char* what;     // what the key does in Megatron
  const char* effect;   // why a neutral value changes nothing in stepgraph: the validation note's words
};

inline constexpr const char* kWandbEffect =
    "stepgraph does not log to Weights & Biases; the metrics go to the run folder's metrics.jsonl and, with "
    "logger.tensorboard_dir, to TensorBoard event files";

// Emission order within each section: the table's. Neutral sets follow Megatron's TransformerConfig /
// ModelParallelConfig semantics (each key's `what`).
inline constexpr BridgeInertKey kBridgeInertKeys[] = {
    {.section = "model", .key = "moe_grouped_gemm", .accepts = InertValues::any_bool, .neutral = "",
     .what = "run a layer's local experts as one grouped GEMM (false: Megatron's SequentialMLP, a GEMM per expert)",
     .effect = "the experts always run as grouped GEMMs, which compute what per-expert GEMMs do"},
    {.section = "model", .key = "moe_permute_fusion", .accepts = InertValues::any_bool, .neutral = "",
     .what = "fused token permute and unpermute kernels", .effect = "a kernel choice"},
    {.section = "model", .key = "moe_router_fusion", .accepts = InertValues::any_bool, .neutral = "",
     .what = "fused top-k routing and aux-loss kernels", .effect = "a kernel choice"},
    {.section = "model", .key = "moe_use_legacy_grouped_gemm", .accepts = InertValues::any_bool, .neutral = "",
     .what = "Megatron's legacy GroupedMLP instead of Transformer Engine's grouped GEMM (removed from Megatron "
             "in 2026)",
     .effect = "a kernel choice"},
    {.section = "model", .key = "moe_router_padding_for_fp8", .accepts = InertValues::any_bool, .neutral = "",
     .what = "pad each expert's token count to a multiple of 16 for FP8 GEMMs (padded rows carry probability 0)",
     .effect = "stepgraph computes in bf16: no FP8 padding"},
    {.section = "model", .key = "moe_shared_expert_overlap", .accepts = InertValues::any_bool, .neutral = "",
     .what = "overlap the shared expert with the token dispatch",
     .effect = "a schedule: the shared expert computes the same"},
    {.section = "model", .key = "moe_per_layer_logging", .accepts = InertValues::any_bool, .neutral = "",
     .what = "log the aux and z losses of every MoE layer", .effect = "logging only"},
    {.section = "model", .key = "moe_flex_dispatcher_backend", .accepts = InertValues::any, .neutral = "",
     .what = "communication backend of the flex token dispatcher (deepep, hybridep, ncclep)",
     .effect = "a communication choice"},
    {.section = "model", .key = "moe_hybridep_num_sms", .accepts = InertValues::any, .neutral = "",
     .what = "SMs HybridEP's dispatch and combine use", .effect = "a communication choice"},
    {.section = "model", .key = "moe_enable_deepep", .accepts = InertValues::listed, .neutral = "false",
     .what = "DeepEP token dispatch (Megatron switches to the flex dispatcher)",
     .effect = "false: the dispatcher is moe_token_dispatcher_type's"},
    {.section = "model", .key = "moe_router_dtype", .accepts = InertValues::listed, .neutral = "fp32",
     .what = "dtype of the router's scores and of the weighting of the expert outputs (fp32, fp64; unset: the "
             "model's dtype)",
     .effect = "the router always computes in fp32"},
    {.section = "model", .key = "moe_input_jitter_eps", .accepts = InertValues::listed, .neutral = "0",
     .what = "multiply the router's input by uniform noise in [1 - eps, 1 + eps]", .effect = "eps 0 adds no noise"},
    {.section = "model", .key = "moe_router_num_groups", .accepts = InertValues::listed, .neutral = "1",
     .what = "group-limited routing: the experts form this many groups", .effect = "one group: plain top-k routing"},
    {.section = "model", .key = "moe_router_group_topk", .accepts = InertValues::listed, .neutral = "1",
     .what = "group-limited routing: the groups each token may use", .effect = "one group: plain top-k routing"},
    {.section = "model", .key = "moe_router_topk_limited_devices", .accepts = InertValues::listed, .neutral = "",
     .what = "device-limited routing (deprecated for moe_router_num_groups)", .effect = ""},
    {.section = "model", .key = "moe_shared_expert_gate", .accepts = InertValues::listed, .neutral = "false",
     .what = "a sigmoid gate on the shared expert's output", .effect = "false: no gate"},
    {.section = "model", .key = "moe_router_force_load_balancing", .accepts = InertValues::listed, .neutral = "false",
     .what = "benchmarking: random router scores, so the experts get even loads",
     .effect = "false: the router's own scores"},
    {.section = "model", .key = "moe_apply_probs_on_input", .accepts = InertValues::listed, .neutral = "false",
     .what = "scale the expert's input by the routing probability instead of its output",
     .effect = "false: the probability scales the expert's output"},
    {.section = "model", .key = "moe_latent_size", .accepts = InertValues::listed, .neutral = "",
     .what = "project the MoE layer's input to a latent width of this size", .effect = ""},
    {.section = "model", .key = "moe_token_dropping", .accepts = InertValues::listed, .neutral = "false",
     .what = "GShard-style token dropping (unsupported in Megatron too; token dropping is moe_expert_capacity_factor)",
     .effect = "false: off"},
    {.section = "model", .key = "moe_expert_rank_capacity_factor", .accepts = InertValues::listed, .neutral = "",
     .what = "token budget of each expert-parallel rank (flex dispatcher)", .effect = ""},
    {.section = "model", .key = "moe_layer_recompute", .accepts = InertValues::listed, .neutral = "false",
     .what = "recompute each MoE layer in the backward; Megatron turns it into recompute_granularity selective "
             "with moe in recompute_modules, which stepgraph has",
     .effect = "false: off"},
    {.section = "model", .key = "expert_tensor_parallel_size", .accepts = InertValues::listed, .neutral = "1",
     .what = "tensor parallelism inside the experts (unset: tensor_model_parallel_size)",
     .effect = "1: the experts are not split"},
    {.section = "model", .key = "hybrid_attention_ratio", .accepts = InertValues::listed, .neutral = "0",
     .what = "share of attention layers when Megatron lays out the hybrid stack itself (deprecated; Megatron "
             "refuses it with a layer pattern): write the layers in hybrid_override_pattern",
     .effect = "0: the layers are hybrid_override_pattern's"},
    {.section = "model", .key = "hybrid_mlp_ratio", .accepts = InertValues::listed, .neutral = "0",
     .what = "share of MLP layers when Megatron lays out the hybrid stack itself (deprecated; Megatron refuses "
             "it with a layer pattern): write the layers in hybrid_override_pattern",
     .effect = "0: the layers are hybrid_override_pattern's"},
    {.section = "model", .key = "mtp_num_layers", .accepts = InertValues::listed, .neutral = "0",
     .what = "multi-token prediction layers", .effect = "0: no multi-token prediction"},
    {.section = "model", .key = "mtp_hybrid_override_pattern", .accepts = InertValues::listed, .neutral = "",
     .what = "layer pattern of the multi-token prediction layers (deprecated)", .effect = ""},
    {.section = "model", .key = "use_mamba_mem_eff_path", .accepts = InertValues::any_bool, .neutral = "",
     .what = "Megatron's fused memory-efficient Mamba kernels", .effect = "a kernel choice"},
    {.section = "model", .key = "mamba_training_ssm_states_dtype", .accepts = InertValues::listed, .neutral = "",
     .what = "dtype of the Mamba scan's inter-chunk states in training (unset: the activations' dtype)",
     .effect = ""},
    {.section = "logger", .key = "wandb_project", .accepts = InertValues::any, .neutral = "",
     .what = "Weights & Biases project", .effect = kWandbEffect},
    {.section = "logger", .key = "wandb_exp_name", .accepts = InertValues::any, .neutral = "",
     .what = "Weights & Biases run name", .effect = kWandbEffect},
    {.section = "logger", .key = "wandb_entity", .accepts = InertValues::any, .neutral = "",
     .what = "Weights & Biases team or user", .effect = kWandbEffect},
    {.section = "logger", .key = "wandb_save_dir", .accepts = InertValues::any, .neutral = "",
     .what = "Weights & Biases local folder", .effect = kWandbEffect},
};

// How many of the table's keys belong to `section` (the size of that section's value array).
constexpr size_t bridge_inert_count(std::string_view section) {
  size_t n = 0;
  for (const BridgeInertKey& k : kBridgeInertKeys) n += section == k.section ? 1 : 0;
  return n;
}

// The value of one of these keys as written (the YAML scalar's text: a number or boolean is not interpreted until
// validation). Unset: null.
struct BridgeInertValue {
  std::optional<std::string> text;
  explicit operator bool() const { return text.has_value(); }
};

// A section's values, in the table's order of that section's keys.
template <size_t N>
using BridgeInertValues = std::array<BridgeInertValue, N>;

// Calls visitor(section, key, value, what) for each of `section`'s keys (visit_fields, config.h).
template <class Values, class Visitor>
void visit_bridge_inert(const char* section, Values& values, Visitor& visitor) {
  size_t i = 0;
  for (const BridgeInertKey& k : kBridgeInertKeys) {
    if (std::string_view(section) == k.section) visitor(k.section, k.key, values[i++], k.what);
  }
}

// The table's row of section.key, or nullptr.
const BridgeInertKey* find_bridge_inert_key(std::string_view section, std::string_view key);
// Whether `value` (as written) changes nothing in stepgraph.
bool bridge_inert_neutral(const BridgeInertKey& key, std::string_view value);
// The neutral values besides null, as docs/configuration.md lists them: "any", "true, false", "fp32", "null only".
std::string bridge_inert_neutral_text(const BridgeInertKey& key);

namespace detail {
// The value as YAML: as written when it reads back the same unquoted (true, 0, 1e-3, fp32), else quoted.
std::string format_yaml(const BridgeInertValue& value);
// Rule 16's part for these keys, after the defaults are resolved: one note naming the keys set to neutral values
// (why each changes nothing), a violation for each key set to a value stepgraph does not implement.
void check_bridge_inert_keys(const Config& config, std::vector<Violation>& violations, std::vector<Note>& notes);
}  // namespace detail

}  // namespace sg::config
