// One key's YAML value into Config (detail::assign_key, and the key facts the overrides ask: canonical_key,
// is_string_key): each value converted to its member's type with an error that names what was expected, Megatron's
// renamed keys (hybrid_layer_pattern, cuda_graph_modules), Bridge's keys moved from train to validation, Megatron's
// one-element lists and Bridge's Hydra references ({_target_: torch.bfloat16, _call_: false}). Apart from
// config_yaml.cpp's document and section walker because the command-line overrides (config_overrides.cpp) and the
// mixed_precision recipes set keys through it too.
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <type_traits>
#include <utility>
#include <vector>

#include "config/config.h"
#include "config/config_detail.h"
#include "core/strings.h"

namespace sg::config::detail {
namespace {

// Quoted scalars carry the non-specific tag "!": '5' is a string, never an integer.
bool is_quoted(const YAML::Node& n) {
  return n.Tag() == "!";
}

std::string describe(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Null: return "null";
    case YAML::NodeType::Scalar: return "'" + n.Scalar() + "'";
    case YAML::NodeType::Sequence: return "a list";
    case YAML::NodeType::Map: return "a map";
    default: return "nothing";
  }
}

[[noreturn]] void type_error(const std::string& where, const YAML::Node& n, const char* expected) {
  throw ConfigError(strprintf("%s: expected %s, got %s", where.c_str(), expected, describe(n).c_str()));
}

std::string lower(std::string s) {
  for (char& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

void convert(const YAML::Node& n, bool& out, const std::string& where) {
  if (!n.IsScalar() || is_quoted(n)) type_error(where, n, "true or false");
  const std::string s = lower(n.Scalar());
  if (s == "true" || s == "yes" || s == "on") {
    out = true;
  } else if (s == "false" || s == "no" || s == "off") {
    out = false;
  } else {
    type_error(where, n, "true or false");
  }
}

void convert(const YAML::Node& n, int64_t& out, const std::string& where) {
  if (!n.IsScalar() || is_quoted(n)) type_error(where, n, "an integer");
  std::string s = n.Scalar();
  if (!s.empty() && s[0] == '+') s.erase(0, 1);
  int64_t v = 0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (s.empty() || ec != std::errc() || end != s.data() + s.size()) {
    if (ec == std::errc::result_out_of_range) type_error(where, n, "an integer in the int64 range");
    type_error(where, n, "an integer");
  }
  out = v;
}

void convert(const YAML::Node& n, double& out, const std::string& where) {
  if (!n.IsScalar() || is_quoted(n)) type_error(where, n, "a number");
  const std::string s = n.Scalar();
  const std::string l = lower(s);
  if (l == ".inf" || l == "+.inf") {
    out = INFINITY;
    return;
  }
  if (l == "-.inf") {
    out = -INFINITY;
    return;
  }
  if (l == ".nan") {
    out = NAN;
    return;
  }
  // Digits, sign, point and exponent only: strtod alone would also take hex floats and "infinity".
  const bool number_chars = !s.empty() && std::all_of(s.begin(), s.end(), [](char ch) {
    return std::isdigit(static_cast<unsigned char>(ch)) || ch == '+' || ch == '-' || ch == '.' || ch == 'e' ||
           ch == 'E';
  });
  char* end = nullptr;
  errno = 0;
  const double v = number_chars ? std::strtod(s.c_str(), &end) : 0.0;
  if (!number_chars || end != s.c_str() + s.size()) type_error(where, n, "a number");
  if (errno == ERANGE && std::isinf(v)) type_error(where, n, "a number in the double range");
  // Underflow: "1e-400" would silently become 0 (and a rate of 0 trains nothing), a denormal loses
  // its precision. A written zero ("0", "0.0e5") stays 0.
  const std::string mantissa = s.substr(0, s.find_first_of("eE"));
  const bool written_zero = mantissa.find_first_of("123456789") == std::string::npos;
  if ((v == 0.0 && !written_zero) || (v != 0.0 && !std::isnormal(v))) {
    type_error(where, n, "a number in the double range (magnitude at least 2.2e-308, or 0)");
  }
  out = v;
}

void convert(const YAML::Node& n, std::string& out, const std::string& where) {
  if (!n.IsScalar()) type_error(where, n, "a string");
  out = n.Scalar();
}

// A YAML list of numbers, or one scalar holding a comma-separated list ("1.0,1.5": an override's); null and "" are
// the empty list.
void convert(const YAML::Node& n, std::vector<double>& out, const std::string& where) {
  std::vector<double> values;
  const auto add = [&](const YAML::Node& item, size_t i) {
    double v = 0.0;
    convert(item, v, strprintf("%s[%zu]", where.c_str(), i));
    values.push_back(v);
  };
  if (n.IsNull()) {
    out.clear();
    return;
  }
  if (n.IsSequence()) {
    for (size_t i = 0; i < n.size(); ++i) add(n[i], i);
  } else if (n.IsScalar() && !is_quoted(n)) {
    if (!trim(n.Scalar()).empty()) {
      const std::vector<std::string> parts = split(n.Scalar(), ',');
      for (size_t i = 0; i < parts.size(); ++i) add(YAML::Node(trim(parts[i])), i);
    }
  } else {
    type_error(where, n, "a list of numbers");
  }
  out = std::move(values);
}

// A YAML list of scalars, or one scalar holding a comma-separated list ("attn,mlp"); null and ""
// are the empty list.
void convert(const YAML::Node& n, std::vector<std::string>& out, const std::string& where) {
  std::vector<std::string> items;
  if (n.IsNull()) {
    out.clear();
    return;
  }
  if (n.IsSequence()) {
    for (const auto& item : n) {
      if (!item.IsScalar()) type_error(where, item, "a list of strings");
      items.push_back(trim(item.Scalar()));
    }
  } else if (n.IsScalar()) {
    if (!trim(n.Scalar()).empty()) {
      for (const auto& part : split(n.Scalar(), ',')) items.push_back(trim(part));
    }
  } else {
    type_error(where, n, "a list of strings or a comma-separated string");
  }
  for (size_t i = 0; i < items.size(); ++i) {
    if (items[i].empty()) {
      throw ConfigError(
          strprintf("%s: item %zu of the list is empty (two commas in a row, or a comma at "
                    "an end); remove it",
                    where.c_str(), i + 1));
    }
  }
  out = std::move(items);
}

// A Bridge key stepgraph accepts without implementing it (bridge_inert_keys.h): any one value, kept as written
// (validation judges it); null unsets it.
void convert(const YAML::Node& n, BridgeInertValue& out, const std::string& where) {
  if (n.IsNull()) {
    out.text.reset();
    return;
  }
  if (!n.IsScalar()) type_error(where, n, "a single value");
  out.text = n.Scalar();
}

template <class T>
void convert(const YAML::Node& n, std::optional<T>& out, const std::string& where) {
  if (n.IsNull()) {
    out.reset();
    return;
  }
  T v{};
  convert(n, v, where);
  out = std::move(v);
}

struct KeyAlias {
  std::string_view section, alias, key;
  std::string_view names;  // which name Megatron prefers, and which one stepgraph writes
};
// Keys Megatron renamed; both spellings are accepted, one at a time: hybrid_override_pattern became
// hybrid_layer_pattern, cuda_graph_scope became cuda_graph_modules (its CUDA-graph refactor, e41b370).
constexpr KeyAlias kKeyAliases[] = {
    {"model", "hybrid_layer_pattern", "hybrid_override_pattern",
     "Megatron's name is hybrid_layer_pattern (--hybrid-override-pattern is deprecated there), and stepgraph's recipes "
     "and `config show` write hybrid_override_pattern"},
    {"model", "cuda_graph_modules", "cuda_graph_scope",
     "Megatron's name is cuda_graph_modules (cuda_graph_scope is deprecated there; Bridge's run_script.py flag is "
     "still --cuda_graph_scope), and stepgraph's recipes and `config show` write cuda_graph_scope"}};

// The pair of names canonical `key` has, or nullptr.
const KeyAlias* alias_of(std::string_view section, std::string_view key) {
  for (const KeyAlias& a : kKeyAliases) {
    if (a.section == section && a.key == key) return &a;
  }
  return nullptr;
}

std::string dotted(std::string_view section, std::string_view key) {
  return std::string(section) + "." + std::string(key);
}

// A renamed key's value as record_key_name takes it, or nullopt when unset (null, "", an empty list): as YAML for
// the message, and as an override's text for the fix ("M*-M", "attn,mlp": one shell word).
struct SetValue {
  std::string yaml, override_text;
};
std::optional<SetValue> as_set_value(const std::optional<std::string>& value) {
  if (!value || value->empty()) return std::nullopt;
  return SetValue{format_yaml(*value), *value};
}
std::optional<SetValue> as_set_value(const std::vector<std::string>& value) {
  if (value.empty()) return std::nullopt;
  return SetValue{format_yaml(value), join(value, ",")};
}

// Records that `name` (one of a's two names) gave the key `value` (as_set_value's) at `where`, or, for nullopt, that
// the key is unset. A value under one name while the other one holds a value (`before`) is refused, as Megatron
// (arguments.py, TransformerConfig) and Bridge (HybridModelProvider.finalize) refuse both set, even to one value.
void record_key_name(Config& config, const KeyAlias& a, std::string_view name, const std::optional<SetValue>& value,
                     const std::optional<SetValue>& before, const std::string& where) {
  const std::string key = dotted(a.section, a.key), used = dotted(a.section, name);
  auto it = std::find_if(config.key_names.begin(), config.key_names.end(),
                         [&](const Config::KeyName& k) { return k.key == key; });
  if (!value) {
    if (it != config.key_names.end()) config.key_names.erase(it);
    return;
  }
  if (it == config.key_names.end()) {
    config.key_names.push_back({key, used, where});
    return;
  }
  if (it->name != used && before) {
    const std::string other = it->name;
    throw ConfigError(strprintf(
        "%s: %s = %s, but %s = %s is set too (at %s): they are two names of one key, and Megatron and "
        "Megatron-Bridge refuse both set, even to the same value. Keep one name: remove one of the two, give the "
        "value under the name already set (%s=%s replaces it), or unset that name first (%s=null). %.*s",
        where.c_str(), used.c_str(), value->yaml.c_str(), other.c_str(), before->yaml.c_str(), it->where.c_str(),
        other.c_str(), value->override_text.c_str(), other.c_str(), static_cast<int>(a.names.size()), a.names.data()));
  }
  it->name = used;
  it->where = where;
}

// Keys Bridge moved to another section and still reads under the old one: TrainingConfig's eval_interval, eval_iters
// and skip_train are deprecated in favour of ValidationConfig's (Bridge's ConfigContainer copies a set one over).
struct MovedKey {
  std::string_view from_section, to_section, key;
};
constexpr MovedKey kMovedKeys[] = {{"train", "validation", "eval_interval"},
                                   {"train", "validation", "eval_iters"},
                                   {"train", "validation", "skip_train"}};

// The moved key section.key is under either of its names, or nullptr.
const MovedKey* moved_key(std::string_view section, std::string_view key) {
  for (const MovedKey& m : kMovedKeys) {
    if (m.key == key && (m.from_section == section || m.to_section == section)) return &m;
  }
  return nullptr;
}

bool from_override(const std::string& where) {
  return where.rfind("override '", 0) == 0;
}

// Records that `section` (one of m's two) gave the key the value `after` (it held `before`) at `where`. In one file,
// the two names holding different values are refused: Bridge would keep the train one without saying so. An override
// replaces the value whichever name gave it.
void record_moved_key_name(Config& config, const MovedKey& m, std::string_view section, const std::string& before,
                           const std::string& after, const std::string& where) {
  const std::string key = dotted(m.to_section, m.key), used = dotted(section, m.key);
  auto it = std::find_if(config.key_names.begin(), config.key_names.end(),
                         [&](const Config::KeyName& k) { return k.key == key; });
  if (it == config.key_names.end()) {
    config.key_names.push_back({key, used, where});
    return;
  }
  // A null is Bridge's unset field: the value set under the other name stands (as Bridge copies a set one over).
  if (it->name != used && before != after && before != "null" && after != "null" && !from_override(where) &&
      !from_override(it->where)) {
    throw ConfigError(strprintf(
        "%s: %s = %s, but %s = %s is set too (at %s): %s is Megatron-Bridge's deprecated name of %s, and the two "
        "differ. Keep one: %s (Bridge's ValidationConfig) is the current name",
        where.c_str(), used.c_str(), after.c_str(), it->name.c_str(), before.c_str(), it->where.c_str(),
        dotted(m.from_section, m.key).c_str(), key.c_str(), key.c_str()));
  }
  it->name = used;
  it->where = where;
}
}  // namespace

std::string_view canonical_key(std::string_view section, std::string_view key) {
  for (const KeyAlias& a : kKeyAliases) {
    if (a.section == section && a.alias == key) return a.key;
  }
  return key;
}

bool is_string_key(std::string_view section, std::string_view key) {
  key = canonical_key(section, key);
  bool string_typed = false;
  const Config defaults;
  visit_fields(defaults, [&](std::string_view s, std::string_view k, const auto& member, const char*) {
    using T = std::decay_t<decltype(member)>;
    if (s == section && k == key) {
      string_typed = std::is_same_v<T, std::string> || std::is_same_v<T, std::optional<std::string>> ||
                     std::is_same_v<T, BridgeInertValue>;
    }
  });
  return string_typed;
}

namespace {
// Keys that newer Megatron also takes as a list where stepgraph implements one value: a one-element list is that
// value, a longer one is refused with `several` (what the list would mean) and the values to pick from.
struct OneOfList {
  std::string_view section, key, several;
};
constexpr OneOfList kOneOfLists[] = {
    {"model", "moe_router_load_balancing_type", "combining several load-balancing losses"},
    {"model", "moe_aux_loss_coeff", "one coefficient per load-balancing type"}};

// `value` as the key takes it: a list of one for such a key is its element.
YAML::Node unlisted(std::string_view section, std::string_view key, const YAML::Node& value, const std::string& where) {
  if (!value.IsSequence()) return value;
  for (const OneOfList& k : kOneOfLists) {
    if (k.section != section || k.key != key) continue;
    if (value.size() == 1) return value[0];  // [aux_loss] is aux_loss
    std::vector<std::string> items;
    for (const auto& item : value) items.push_back(item.IsScalar() ? item.Scalar() : describe(item));
    if (items.empty()) throw ConfigError(where + " = []: the list is empty; give one value");
    throw ConfigError(
        strprintf("%s = [%s]: %.*s (Megatron's list form) is not implemented; pick one of the list's "
                  "values (%s)",
                  where.c_str(), join(items, ", ").c_str(), static_cast<int>(k.several.size()), k.several.data(),
                  join(items, " or ").c_str()));
  }
  return value;
}
}  // namespace

namespace {
// Sets section.key, `key` in either of its names (a KeyAlias's).
bool assign_field(Config& config, std::string_view section, std::string_view key, const YAML::Node& value,
                  const std::string& where) {
  const std::string_view name = key;  // as written: one of a key's two names, for its record
  key = canonical_key(section, key);
  // Megatron's None for recompute_modules is its default list (TransformerConfig: None -> ["core_attn"]), not an
  // empty one.
  static const std::vector<std::string> kDefaultRecomputeModules = ModelConfig().recompute_modules;
  bool found = false;
  visit_fields(config, [&](std::string_view s, std::string_view k, auto& member, const char*) {
    if (found || s != section || k != key) return;
    found = true;
    const std::string at = strprintf("%s: %.*s.%.*s", where.c_str(), static_cast<int>(s.size()), s.data(),
                                     static_cast<int>(k.size()), k.data());
    using T = std::decay_t<decltype(member)>;
    if constexpr (std::is_same_v<T, std::vector<std::string>>) {
      if (value.IsNull() && s == "model" && k == "recompute_modules") {
        member = kDefaultRecomputeModules;
        return;
      }
    }
    if constexpr (std::is_same_v<T, std::optional<std::string>> || std::is_same_v<T, std::vector<std::string>>) {
      if (const KeyAlias* alias = alias_of(s, k)) {
        const T before = member;
        convert(unlisted(s, k, value, at), member, at);
        try {
          record_key_name(config, *alias, name, as_set_value(member), as_set_value(before), where);
        } catch (const ConfigError&) {
          member = before;  // refused: the config keeps the value it had
          throw;
        }
        return;
      }
    }
    convert(unlisted(s, k, value, at), member, at);
  });
  return found;
}

// Bridge's YAML dump writes a torch.dtype, and a function it does not call, as a Hydra reference
// ({_target_: torch.bfloat16, _call_: false}: megatron/training/config/yaml_utils.py): the name is the value.
YAML::Node hydra_reference_as_name(const YAML::Node& value) {
  if (!value.IsMap() || value.size() != 2 || !value[kHydraTargetKey].IsScalar()) return value;
  const YAML::Node call = value["_call_"];
  if (!call.IsScalar() || (call.Scalar() != "false" && call.Scalar() != "False")) return value;
  return YAML::Node(value[kHydraTargetKey].Scalar());
}

}  // namespace

bool assign_key(Config& config, std::string_view section, std::string_view key, const YAML::Node& written,
                const std::string& where) {
  const YAML::Node value = hydra_reference_as_name(written);
  if (const MovedKey* moved = moved_key(section, key)) {
    // A file's null under the old name is Bridge's unset TrainingConfig field (its default), which Bridge does not
    // copy: a dump of a Bridge config writes `train: eval_interval: null` beside `validation: eval_interval: 500`.
    if (section == moved->from_section && value.IsNull() && !from_override(where)) return true;
    // The same for a null under the new name after the old name gave a value in this file (a Bridge dump before its
    // finalize copied it over).
    if (value.IsNull() && !from_override(where)) {
      const std::string key = dotted(moved->to_section, moved->key);
      for (const Config::KeyName& k : config.key_names) {
        if (k.key == key && k.name != key && !from_override(k.where)) return true;
      }
    }
    const std::string target = dotted(moved->to_section, moved->key);
    const std::string before = format_value(config, target);
    try {
      assign_field(config, moved->to_section, moved->key, value, where);
    } catch (const ConfigError& e) {
      if (section == moved->to_section) throw;
      throw ConfigError(strprintf("%s (written as %s, Bridge's deprecated name of %s)", e.what(),
                                  dotted(section, key).c_str(), target.c_str()));
    }
    const std::string after = format_value(config, target);
    try {
      record_moved_key_name(config, *moved, section, before, after, where);
    } catch (const ConfigError&) {
      assign_field(config, moved->to_section, moved->key, YAML::Load(before), where);  // keeps the value it had
      throw;
    }
    return true;
  }
  return assign_field(config, section, key, value, where);
}

}  // namespace sg::config::detail
