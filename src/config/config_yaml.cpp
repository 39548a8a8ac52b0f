// YAML -> Config: every value is type-checked and every key must exist, with errors that name the
// file, line and column, the key, what was expected and (for unknown keys) the closest valid key.
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <set>
#include <type_traits>
#include <utility>
#include <vector>

#include "config/config.h"
#include "config/config_detail.h"
#include "config/mixed_precision.h"
#include "core/strings.h"

namespace sg::config::detail {
namespace {

// Hydra's instantiation key, which Bridge writes into every section of a saved config (config_utils.py).
constexpr const char* kHydraTargetKey = "_target_";

// Quoted scalars carry the non-specific tag "!": '5' is a string, never an integer.
bool is_quoted(const YAML::Node& n) { return n.Tag() == "!"; }

std::string describe(const YAML::Node& n) {
  switch (n.Type()) {
    case YAML::NodeType::Null:
      return "null";
    case YAML::NodeType::Scalar:
      return "'" + n.Scalar() + "'";
    case YAML::NodeType::Sequence:
      return "a list";
    case YAML::NodeType::Map:
      return "a map";
    default:
      return "nothing";
  }
}

[[noreturn]] void type_error(const std::string& where, const YAML::Node& n, const char* expected) {
  throw ConfigError(
      strprintf("%s: expected %s, got %s", where.c_str(), expected, describe(n).c_str()));
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
    return std::isdigit(static_cast<unsigned char>(ch)) || ch == '+' || ch == '-' || ch == '.' ||
           ch == 'e' || ch == 'E';
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
      throw ConfigError(strprintf("%s: item %zu of the list is empty (two commas in a row, or a comma at "
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

}  // namespace

std::string position(const std::string& source, const YAML::Mark& mark) {
  if (mark.is_null()) return source;
  return strprintf("%s:%d:%d", source.c_str(), mark.line + 1, mark.column + 1);
}

namespace {
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
YAML::Node unlisted(std::string_view section, std::string_view key, const YAML::Node& value,
                    const std::string& where) {
  if (!value.IsSequence()) return value;
  for (const OneOfList& k : kOneOfLists) {
    if (k.section != section || k.key != key) continue;
    if (value.size() == 1) return value[0];  // [aux_loss] is aux_loss
    std::vector<std::string> items;
    for (const auto& item : value) items.push_back(item.IsScalar() ? item.Scalar() : describe(item));
    if (items.empty()) throw ConfigError(where + " = []: the list is empty; give one value");
    throw ConfigError(strprintf("%s = [%s]: %.*s (Megatron's list form) is not implemented; pick one of the list's "
                                "values (%s)",
                                where.c_str(), join(items, ", ").c_str(), static_cast<int>(k.several.size()),
                                k.several.data(), join(items, " or ").c_str()));
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

namespace {

// One adjacent pair swapped ("szie" for "size"): one slip of the fingers, two edits to edit_distance.
bool swapped_pair(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  size_t i = 0;
  while (i < a.size() && a[i] == b[i]) ++i;
  return i + 1 < a.size() && a[i] == b[i + 1] && a[i + 1] == b[i] && a.substr(i + 2) == b.substr(i + 2);
}

// Word `a` of a mistyped key for word `b` of a real one: a typo (at most a third of the word, at least one edit, or
// a swapped pair) or an abbreviation ("eps" for "epsilon", "frequency" for "freq": one starts with the other, the
// shorter of at least 3 letters).
bool word_typo(std::string_view a, std::string_view b) {
  const size_t shorter = std::min(a.size(), b.size()), longer = std::max(a.size(), b.size());
  return edit_distance(a, b) <= std::max<size_t>(1, longer / 3) || swapped_pair(a, b) ||
         (shorter >= 3 && a.substr(0, shorter) == b.substr(0, shorter));
}

// Whether the unknown `key` may be a mistyped `candidate`, so that suggesting it helps: the same words with typos
// (word_typo), the candidate's words with one left out (tensor_parallel_size for tensor_model_parallel_size), or the
// same letters with underscores missing, extra or moved and at most one typo. A word added or replaced by another
// word names something else however close the spelling (moe_router_dtype is no moe_router_topk, mtp_num_layers no
// num_layers, expert_tensor_parallel_size no expert_model_parallel_size): no suggestion then.
bool plausible_key_typo(std::string_view key, std::string_view candidate) {
  const std::vector<std::string> words = split(key, '_'), candidate_words = split(candidate, '_');
  if (words.size() == candidate_words.size()) {
    bool typos = true;
    for (size_t i = 0; i < words.size() && typos; ++i) typos = word_typo(words[i], candidate_words[i]);
    if (typos) return true;
  }
  if (candidate_words.size() == words.size() + 1) {
    size_t matched = 0;
    for (const std::string& word : candidate_words) {
      if (matched < words.size() && word == words[matched]) ++matched;
    }
    if (matched == words.size()) return true;
  }
  const auto letters = [](std::string_view s) {
    std::string out;
    for (const char ch : s) {
      if (ch != '_') out += ch;
    }
    return out;
  };
  const std::string a = letters(key), b = letters(candidate);
  return edit_distance(a, b) <= 1 || swapped_pair(a, b);
}

}  // namespace

std::string unknown_key_message(std::string_view section, std::string_view key) {
  std::vector<std::string> same_section;  // the section's keys `key` may be a typo of
  std::vector<std::string> elsewhere;  // the same key name under another section
  const Config defaults;
  visit_fields(defaults, [&](std::string_view s, std::string_view k, const auto&, const char*) {
    if (s == section && plausible_key_typo(key, k)) same_section.emplace_back(k);
    if (s != section && k == key) elsewhere.push_back(std::string(s) + "." + std::string(k));
  });
  std::string message = strprintf("unknown key '%.*s.%.*s'", static_cast<int>(section.size()),
                                  section.data(), static_cast<int>(key.size()), key.data());
  if (key == "<<") {  // yaml-cpp reads a merge key as a plain key
    return message + ": YAML merge keys (<<) are not supported; write the keys out in the section";
  }
  const std::string close = closest_match(key, same_section);
  if (!close.empty()) {
    message += strprintf("; did you mean '%.*s.%s'?", static_cast<int>(section.size()),
                         section.data(), close.c_str());
  } else if (!elsewhere.empty()) {
    message += "; did you mean '" + join(elsewhere, "' or '") + "'?";
  } else {
    message += strprintf("; the keys of section '%.*s' are listed in docs/configuration.md",
                         static_cast<int>(section.size()), section.data());
  }
  return message;
}

std::string unknown_section_message(std::string_view section) {
  std::string message =
      strprintf("unknown section '%.*s'", static_cast<int>(section.size()), section.data());
  const std::string close = closest_match(section, config_sections());
  std::vector<std::string> as_key;  // a key written without its section
  const Config defaults;
  visit_fields(defaults, [&](std::string_view s, std::string_view k, const auto&, const char*) {
    if (k == section) as_key.push_back(std::string(s) + "." + std::string(k));
  });
  if (!close.empty()) {
    message += "; did you mean '" + close + "'?";
  } else if (!as_key.empty()) {
    message += "; did you mean '" + join(as_key, "' or '") + "'? (keys go under their section)";
  } else {
    message += "; the sections are " + join(config_sections(), ", ");
  }
  return message;
}

}  // namespace sg::config::detail

namespace sg::config {
namespace {

// 1-based line of a "---" document marker that follows content, or 0. A recipe is one document;
// yaml-cpp's Load would silently read only the first.
int second_document_line(std::string_view text) {
  bool content = false;
  int line_number = 0;
  for (const auto& raw : split(text, '\n')) {
    ++line_number;
    const std::string line = trim(raw);
    const bool marker = raw.rfind("---", 0) == 0 &&
                        (raw.size() == 3 || raw[3] == ' ' || raw[3] == '\t' || raw[3] == '\r');
    if (marker && content) return line_number;
    if (!marker && !line.empty() && line[0] != '#' && line[0] != '%') content = true;
  }
  return 0;
}

// 1-based line of the first NUL byte, or 0. yaml-cpp reads past a NUL and reports a confusing
// error far from it (or none), so it is refused first.
int nul_byte_line(std::string_view text) {
  const size_t at = text.find('\0');
  if (at == std::string_view::npos) return 0;
  return 1 + static_cast<int>(std::count(text.begin(), text.begin() + static_cast<std::ptrdiff_t>(at), '\n'));
}

// True when the text holds nothing but comments, blank lines, document markers and a null: the only
// texts that may load as a null document (yaml-cpp also returns null for some unreadable input).

bool only_comments(std::string_view text) {
  for (const auto& raw : split(text, '\n')) {
    const std::string line = trim(raw);
    if (line.empty() || line[0] == '#' || line[0] == '%' || line == "---" || line == "..." ||
        line == "null" || line == "~") {
      continue;
    }
    return false;
  }
  return true;
}

// The hint for a parse error on line `line` (0-based) whose value starts with a YAML indicator: an unquoted
// hybrid pattern such as `*-M-` reads as an alias, `&x` as an anchor, `!x` as a tag. "" otherwise.
std::string quoting_hint(std::string_view text, int line) {
  size_t begin = 0;
  for (int i = 0; i < line && begin != std::string_view::npos; ++i) {
    begin = text.find('\n', begin);
    if (begin != std::string_view::npos) ++begin;
  }
  if (begin == std::string_view::npos || line < 0) return "";
  const std::string_view row = text.substr(begin, text.find('\n', begin) - begin);
  const size_t colon = row.find(": ");
  if (colon == std::string_view::npos) return "";
  const std::string key = trim(std::string(row.substr(0, colon)));
  const std::string value = trim(std::string(row.substr(colon + 2)));
  if (value.empty() || std::string_view("*&!@`%").find(value[0]) == std::string_view::npos) return "";
  return strprintf(" (a value starting with '%c' is YAML syntax; quote it: %s: \"%s\")", value[0], key.c_str(),
                   value.c_str());
}

}  // namespace

Config load_config_yaml(std::string_view text, const std::string& source) {
  Config config;
  config.source = source;
  merge_config_yaml(config, text, source);
  return config;
}

void merge_config_yaml(Config& config, std::string_view text, const std::string& source) {
  using detail::position;
  if (const int line = nul_byte_line(text); line > 0) {
    throw ConfigError(strprintf("%s:%d: the file holds a NUL byte (binary data, or a UTF-16 file?); a "
                                "recipe is UTF-8 text",
                                source.c_str(), line));
  }
  if (const int line = second_document_line(text); line > 0) {
    throw ConfigError(
        strprintf("%s:%d: a second YAML document starts here; a recipe is one document",
                  source.c_str(), line));
  }
  YAML::Node root;
  try {
    // YAML::Load, not LoadAll: yaml-cpp 0.7's LoadAll never returns on some inputs (a leading ',').
    root = YAML::Load(std::string(text));
  } catch (const YAML::ParserException& e) {
    throw ConfigError(strprintf("%s: invalid YAML: %s%s", position(source, e.mark).c_str(), e.msg.c_str(),
                                quoting_hint(text, e.mark.line).c_str()));
  } catch (const YAML::Exception& e) {
    throw ConfigError(strprintf("%s: invalid YAML: %s", source.c_str(), e.what()));
  }
  if (root.IsNull()) {
    if (!only_comments(text)) {
      throw ConfigError(source +
                        ": invalid YAML: no document could be read (check the first lines)");
    }
    return;
  }
  if (!root.IsMap()) {
    throw ConfigError(strprintf("%s: a recipe is a map of sections (model:, train:, ...), got %s",
                                position(source, root.Mark()).c_str(),
                                root.IsSequence() ? "a list" : "a single value"));
  }
  try {
    std::set<std::string> seen_sections;
    for (const auto& section_entry : root) {
      const YAML::Node& section_key = section_entry.first;
      const YAML::Node& section_value = section_entry.second;
      const std::string where = position(source, section_key.Mark());
      if (!section_key.IsScalar())
        throw ConfigError(where + ": a section name must be a plain word");
      const std::string section = section_key.Scalar();
      if (section == detail::kHydraTargetKey) continue;  // the ConfigContainer's class, in a saved Bridge config
      const auto sections = config_sections();
      if (std::find(sections.begin(), sections.end(), section) == sections.end()) {
        throw ConfigError(where + ": " + detail::unknown_section_message(section));
      }
      if (!seen_sections.insert(section).second) {
        throw ConfigError(where + ": section '" + section + "' appears twice");
      }
      if (section_value.IsNull()) continue;
      // Bridge's mixed_precision may name a recipe (mixed_precision: bf16_mixed): the keys the recipe sets.
      if (section == "mixed_precision" && section_value.IsScalar()) {
        detail::assign_mixed_precision_recipe(config, section_value.Scalar(),
                                              position(source, section_value.Mark()));
        continue;
      }
      if (!section_value.IsMap()) {
        throw ConfigError(strprintf("%s: section '%s' must be a map of keys, got %s",
                                    position(source, section_value.Mark()).c_str(), section.c_str(),
                                    section_value.IsSequence() ? "a list" : "a single value"));
      }
      std::set<std::string> seen_keys;
      // The section's entries, and those of Megatron's model.transformer (the TransformerConfig a Bridge GPT or
      // hybrid model config holds; its keys are model keys here, as Bridge's own attribute proxy reads them).
      std::vector<std::pair<YAML::Node, YAML::Node>> entries;
      for (const auto& entry : section_value) {
        const bool nested = section == "model" && entry.first.IsScalar() && entry.first.Scalar() == "transformer" &&
                            entry.second.IsMap();
        if (!nested) {
          entries.emplace_back(entry.first, entry.second);
          continue;
        }
        for (const auto& inner : entry.second) entries.emplace_back(inner.first, inner.second);
      }
      for (const auto& [key_node, value_node] : entries) {
        const std::string key_where = position(source, key_node.Mark());
        if (!key_node.IsScalar()) throw ConfigError(key_where + ": a key must be a plain word");
        const std::string key = key_node.Scalar();
        // The class a Bridge config file names for instantiating the section: stepgraph builds its own.
        if (key == detail::kHydraTargetKey) continue;
        // The same name twice; a key's two names (hybrid_override_pattern, hybrid_layer_pattern) both with a value
        // are refused by assign_key, naming both values.
        if (!seen_keys.insert(key).second) {
          throw ConfigError(
              strprintf("%s: key '%s.%s' appears twice", key_where.c_str(), section.c_str(), key.c_str()));
        }
        const std::string value_where = position(source, value_node.Mark());
        if (!detail::assign_key(config, section, key, value_node, value_where)) {
          throw ConfigError(key_where + ": " + detail::unknown_key_message(section, key));
        }
      }
    }
  } catch (const YAML::Exception& e) {  // yaml-cpp's own conversions; not expected, kept clear
    throw ConfigError(strprintf("%s: %s", position(source, e.mark).c_str(), e.msg.c_str()));
  }
}

}  // namespace sg::config
