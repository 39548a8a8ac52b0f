#pragma once
// Activation recompute as Megatron spells it (config keys model.recompute_*), independent of the config:
//   granularity selective: the listed modules of every layer drop their saved activations in the forward
//                          and recompute them at the start of the layer's backward;
//   granularity full:      whole Megatron layers (a GPT block, or one letter of a hybrid pattern) keep only
//                          their input (the residual stream) and recompute everything else; method
//                          uniform recomputes every layer, in chunks of num_layers layers that keep one
//                          input each; method block recomputes only the first num_layers layers.
// What each layer kind can recompute is the kind's declaration (model/recompute.h, layer_registry.h); how
// the step lays the memory out and when it recomputes is model/recompute_layout.h.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace sg::model {

// Megatron's recompute_modules, plus mla_up_proj (a name Megatron has; no layer kind here has it).
enum class RecomputeModule : uint8_t { core_attn, mlp, layernorm, moe_act, moe, shared_experts, mamba, mla_up_proj };
enum class RecomputeGranularity : uint8_t { none, selective, full };
enum class RecomputeMethod : uint8_t { uniform, block };

// Megatron's spellings of model.recompute_granularity and model.recompute_method (recompute_spec.cpp holds the
// one table). The name lists are in Megatron's choices order, the order messages give them. Granularity none
// is the key left unset: it is named "none" (as `bench --compare` spells recompute_none) but is no config
// spelling, so find_recompute_granularity does not accept it.
const char* recompute_granularity_name(RecomputeGranularity granularity);  // "none", "selective", "full"
std::optional<RecomputeGranularity> find_recompute_granularity(std::string_view name);  // selective, full
std::vector<std::string> recompute_granularity_names();  // full, selective
const char* recompute_method_name(RecomputeMethod method);  // "uniform", "block"
std::optional<RecomputeMethod> find_recompute_method(std::string_view name);
std::vector<std::string> recompute_method_names();  // uniform, block

// Full recompute's settings where model.recompute_method / recompute_num_layers are unset: Megatron asserts
// both are set (validation says so), and `bench --compare`'s recompute_full fills them with these.
struct FullRecomputeDefaults {
  RecomputeMethod method;
  int64_t num_layers;
};
constexpr FullRecomputeDefaults full_recompute_defaults() {
  return {.method = RecomputeMethod::uniform, .num_layers = 1};
}

struct RecomputeSpec {
  RecomputeGranularity granularity = RecomputeGranularity::none;
  std::vector<RecomputeModule> modules;             // selective
  RecomputeMethod method = RecomputeMethod::uniform;  // full
  int64_t num_layers = 0;                           // full: Megatron layers per chunk (uniform) or recomputed (block)

  bool on() const { return granularity != RecomputeGranularity::none; }
  bool selects(RecomputeModule m) const {
    if (granularity != RecomputeGranularity::selective) return false;
    for (RecomputeModule x : modules) {
      if (x == m) return true;
    }
    return false;
  }
};

}  // namespace sg::model
