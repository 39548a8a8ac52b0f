#pragma once
// Internal to src/config/*.cpp: typed conversion between YAML nodes and config members, and
// the value formatting the emitter and validation messages share. Not part of the config/ interface.
#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "config/config.h"
#include "config/moe_layer_freq.h"

namespace sg::config::detail {

// Hydra's instantiation key, which Bridge writes into every section of a saved config (config_utils.py): the
// section walker skips it, assign_key reads a Hydra reference ({_target_: torch.bfloat16, _call_: false}) by it.
inline constexpr const char* kHydraTargetKey = "_target_";

// Sets section.key from `value`. `where` prefixes error messages ("file:3:5" or "override '...'"). A key under
// another name (model.hybrid_layer_pattern) or its deprecated section (train.eval_interval for
// validation.eval_interval) sets the key and records the name in Config::key_names. Returns false when the key does not exist (the caller reports it with a suggestion); throws
// ConfigError when the value has the wrong type.
bool assign_key(Config& config, std::string_view section, std::string_view key,
                const YAML::Node& value, const std::string& where);

// The key Megatron's other spelling `key` stands for ("hybrid_layer_pattern" ->
// "hybrid_override_pattern"), or `key` itself.
std::string_view canonical_key(std::string_view section, std::string_view key);

// True when section.key holds a string (std::string or optional<std::string>): such keys take a
// command-line override's raw text when it is not YAML (an unquoted "*-*-" pattern reads as an alias).
bool is_string_key(std::string_view section, std::string_view key);

// "unknown key 'model.hiden_size'; did you mean 'model.hidden_size'?" (no suggestion when nothing
// is close), and the same for a section.
std::string unknown_key_message(std::string_view section, std::string_view key);
std::string unknown_section_message(std::string_view section);

// "file:line:column" of a node (1-based), for messages.
std::string position(const std::string& source, const YAML::Mark& mark);

// YAML text of one value, as emit_yaml prints it.
std::string format_yaml(bool v);
std::string format_yaml(int64_t v);
std::string format_yaml(double v);
std::string format_yaml(const std::string& v);
std::string format_yaml(const std::vector<std::string>& v);
std::string format_yaml(const std::vector<double>& v);
template <class T>
std::string format_yaml(const std::optional<T>& v) {
  return v ? format_yaml(*v) : std::string("null");
}

// One field as emit_yaml prints it (format_value too): model.moe_layer_freq in Bridge's forms, the rest by type.
template <class T>
std::string format_field(std::string_view section, std::string_view key, const T& member) {
  if constexpr (std::is_same_v<T, std::vector<std::string>>) {
    if (section == "model" && key == "moe_layer_freq") return format_moe_layer_freq(member);
  }
  return format_yaml(member);
}

}  // namespace sg::config::detail
