// Bridge's mixed_precision section: its recipes written out as keys, and its setup over the model's, optimizer's and
// ddp's keys (mixed_precision.h).
#include "config/mixed_precision.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <type_traits>

#include "config/config_detail.h"
#include "config/validate.h"
#include "core/strings.h"

namespace sg::config {
namespace {

constexpr const char* kSection = "mixed_precision";
constexpr const char* kGradReduceKey = "grad_reduce_in_fp32";

struct RecipeKey {
  const char* key;
  const char* value;  // as Bridge's YAML dump writes it (a torch.dtype as str(dtype))
};

// Bridge's megatron/bridge/training/mixed_precision.py recipes: the fields each sets, after those of its base
// (bf16_mixed or fp16_mixed).
struct Recipe {
  const char* name;
  const char* base;  // nullptr: none
  std::vector<RecipeKey> keys;
};

// The FP8 and FP4 settings Bridge's bf16_* and fp16_* recipes share.
const std::vector<RecipeKey> kFp8DelayedScaling = {{"fp8", "hybrid"},
                                                   {"fp8_recipe", "delayed"},
                                                   {"fp8_margin", "0"},
                                                   {"fp8_amax_history_len", "1024"},
                                                   {"fp8_amax_compute_algo", "max"},
                                                   {"fp8_param_gather", "true"},
                                                   {"fp8_param", "true"}};
const std::vector<RecipeKey> kMxfp8 = {{"fp8", "e4m3"},
                                       {"fp8_recipe", "mxfp8"},
                                       {"fp8_param_gather", "true"},
                                       {"fp8_param", "true"},
                                       {"reuse_grad_buf_for_mxfp8_param_ag", "true"}};
// FP8 current scaling with the first and last `layers` layers in bf16.
std::vector<RecipeKey> fp8_current_scaling(const char* recipe, const char* layers) {
  return {{"fp8", "hybrid"},
          {"fp8_recipe", recipe},
          {"first_last_layers_bf16", "true"},
          {"num_layers_at_start_in_bf16", layers},
          {"num_layers_at_end_in_bf16", layers},
          {"fp8_param_gather", "true"},
          {"fp8_param", "true"}};
}
const std::vector<RecipeKey> kFp8Subchannel = {
    {"fp8", "hybrid"}, {"fp8_recipe", "blockwise"}, {"fp8_param_gather", "false"}};

const std::vector<Recipe>& recipes() {
  static const std::vector<Recipe> table = {
      {"bf16_mixed",
       nullptr,
       {{"bf16", "true"},
        {"params_dtype", "torch.bfloat16"},
        {"pipeline_dtype", "torch.bfloat16"},
        {"autocast_enabled", "false"},
        {"grad_reduce_in_fp32", "true"}}},
      {"fp16_mixed",
       nullptr,
       {{"fp16", "true"},
        {"params_dtype", "torch.float16"},
        {"pipeline_dtype", "torch.float16"},
        {"autocast_enabled", "false"},
        {"grad_reduce_in_fp32", "false"}}},
      {"bf16_with_fp8_delayed_scaling_mixed", "bf16_mixed", kFp8DelayedScaling},
      {"fp16_with_fp8_delayed_scaling_mixed", "fp16_mixed", kFp8DelayedScaling},
      {"bf16_with_mxfp8_mixed", "bf16_mixed", kMxfp8},
      {"fp16_with_mxfp8_mixed", "fp16_mixed", kMxfp8},
      {"bf16_with_fp8_current_scaling_mixed", "bf16_mixed", fp8_current_scaling("tensorwise", "1")},
      {"nemotron_h_bf16_with_fp8_current_scaling_mixed", "bf16_mixed", fp8_current_scaling("tensorwise", "2")},
      {"nanov2_bf16_with_fp8_current_scaling_mixed", "bf16_mixed", fp8_current_scaling("blockwise", "2")},
      {"fp16_with_fp8_current_scaling_mixed", "fp16_mixed", fp8_current_scaling("tensorwise", "1")},
      {"bf16_with_fp8_subchannel_scaling_mixed", "bf16_mixed", kFp8Subchannel},
      {"fp16_with_fp8_subchannel_scaling_mixed", "fp16_mixed", kFp8Subchannel},
      {"bf16_with_nvfp4_mixed",
       "bf16_mixed",
       {{"fp4", "e2m1"},
        {"fp4_recipe", "nvfp4"},
        {"fp8_param_gather", "false"},
        {"fp4_param_gather", "true"},
        {"fp4_param", "true"}}},
      {"nemotron_3_super_bf16_with_nvfp4_mixed",
       "bf16_with_nvfp4_mixed",
       {{"first_last_layers_bf16", "true"}, {"num_layers_at_end_in_bf16", "14"}}},
  };
  return table;
}

const Recipe* find_precision_recipe(std::string_view name) {
  for (const Recipe& r : recipes()) {
    if (name == r.name) return &r;
  }
  return nullptr;
}

// The recipe's keys, its bases' first (a later value of a key replaces an earlier one).
void recipe_keys(const Recipe& recipe, std::vector<RecipeKey>& out) {
  if (recipe.base != nullptr) recipe_keys(*find_precision_recipe(recipe.base), out);
  for (const RecipeKey& k : recipe.keys) {
    auto it =
        std::find_if(out.begin(), out.end(), [&](const RecipeKey& o) { return std::string_view(o.key) == k.key; });
    if (it == out.end()) {
      out.push_back(k);
    } else {
      it->value = k.value;
    }
  }
}

// Calls fn(section, key, value) for each Bridge key of the config (config/bridge_inert_keys.h), value mutable.
template <class Fn>
void for_each_bridge_key(Config& config, Fn&& fn) {
  visit_fields(config, [&](std::string_view section, std::string_view key, auto& member, const char*) {
    if constexpr (std::is_same_v<std::decay_t<decltype(member)>, BridgeInertValue>) fn(section, key, member);
  });
}

BridgeInertValue* bridge_value(Config& config, std::string_view section, std::string_view key) {
  BridgeInertValue* out = nullptr;
  for_each_bridge_key(config, [&](std::string_view s, std::string_view k, BridgeInertValue& v) {
    if (s == section && k == key) out = &v;
  });
  return out;
}

}  // namespace

const std::vector<std::string>& mixed_precision_recipe_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const Recipe& r : recipes()) out.emplace_back(r.name);
    return out;
  }();
  return names;
}

namespace detail {

void assign_mixed_precision_recipe(Config& config, std::string_view name, const std::string& where) {
  std::string underscored(name);
  std::replace(underscored.begin(), underscored.end(), '-', '_');  // NeMo 2's spelling, as Bridge reads it
  const Recipe* recipe = find_precision_recipe(underscored);
  if (recipe == nullptr) {
    throw ConfigError(strprintf(
        "%s: mixed_precision '%.*s' is no Megatron-Bridge mixed-precision recipe; the "
        "recipes: %s (stepgraph trains as bf16_mixed), or write the section as a map of "
        "MixedPrecisionConfig keys",
        where.c_str(), static_cast<int>(name.size()), name.data(), join(mixed_precision_recipe_names(), ", ").c_str()));
  }
  std::vector<RecipeKey> keys;
  recipe_keys(*recipe, keys);
  config.mixed_precision = {};
  for (const RecipeKey& k : keys) assign_key(config, kSection, k.key, YAML::Node(k.value), where);
}

bool has_mixed_precision(const Config& config) {
  return std::any_of(config.mixed_precision.bridge_inert.begin(), config.mixed_precision.bridge_inert.end(),
                     [](const BridgeInertValue& v) { return static_cast<bool>(v); });
}

void apply_mixed_precision(Config& config, std::vector<Note>& notes) {
  if (!has_mixed_precision(config)) return;
  std::vector<KeyValue> replaced;  // the values the section replaced, as they were
  // Unset, the dataclass default (true); a value that is no boolean is refused by the key's check, not copied.
  const BridgeInertValue& grad_reduce = *bridge_value(config, kSection, kGradReduceKey);
  std::optional<bool> fp32_grads = true;
  if (grad_reduce) {
    const std::optional<std::string> written = yaml_bool(*grad_reduce.text);
    fp32_grads = written ? std::optional<bool>(*written == "true") : std::nullopt;
  }
  if (fp32_grads && *fp32_grads != config.ddp.grad_reduce_in_fp32) {
    replaced.push_back({"ddp.grad_reduce_in_fp32", config.ddp.grad_reduce_in_fp32 ? "true" : "false"});
    config.ddp.grad_reduce_in_fp32 = *fp32_grads;
  }
  // The model's and optimizer's keys of the section's names give way to the section's values (set or not).
  std::vector<std::pair<std::string, std::optional<std::string>>> section_values;
  for_each_bridge_key(config, [&](std::string_view s, std::string_view k, BridgeInertValue& v) {
    if (s == kSection && k != kGradReduceKey) section_values.emplace_back(std::string(k), v.text);
  });
  for_each_bridge_key(config, [&](std::string_view s, std::string_view k, BridgeInertValue& v) {
    if (s == kSection || !v) return;
    const auto it =
        std::find_if(section_values.begin(), section_values.end(), [&](const auto& entry) { return entry.first == k; });
    if (it == section_values.end()) return;
    if (v.text != it->second) replaced.push_back({std::string(s) + "." + std::string(k), format_yaml(v)});
    v.text.reset();
  });
  if (!replaced.empty()) {
    notes.push_back({16,
                     "replaced by the mixed_precision section, as Bridge's MixedPrecisionConfig.setup copies each "
                     "of its fields (unset ones as their defaults: grad_reduce_in_fp32 true) over the model's, "
                     "optimizer's and ddp's keys of the same name; set the value in mixed_precision instead",
                     replaced});
  }
  const auto unset = [&](const char* key) { return !*bridge_value(config, kSection, key); };
  if (unset("bf16") && unset("fp16") && unset("fp32")) {
    notes.push_back({16,
                     "the mixed_precision section sets none of bf16, fp16, fp32: Bridge's MixedPrecisionConfig "
                     "defaults bf16 to false (fp32 training) unless the section is merged over a recipe's "
                     "bf16_mixed; stepgraph trains in bf16 mixed precision, as bf16_mixed does (write "
                     "mixed_precision.bf16: true, or mixed_precision: bf16_mixed)",
                     {}});
  }
}

}  // namespace detail
}  // namespace sg::config
