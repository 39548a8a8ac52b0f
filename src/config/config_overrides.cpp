// Dotted command-line overrides, Megatron-Bridge style: model.cuda_graph_scope=attn,mlp
// train.train_iters=50 checkpoint.save=null. The value is read as a YAML scalar or flow list; a
// string-typed key takes the raw text when it is not YAML at all (model.hybrid_override_pattern=*-*-). An empty
// value is null, except for path keys (checkpoint.save=), which refuse it.
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <iterator>
#include <string_view>

#include "config/config.h"
#include "config/config_detail.h"
#include "config/mixed_precision.h"
#include "core/strings.h"

namespace sg::config {
namespace {

constexpr size_t kMaxOverrideLength = 4096;
constexpr int kMaxBrackets = 16;  // a real value has at most one [..]; this bounds parser recursion

std::string printable(std::string_view text) {
  std::string out;
  for (const char ch : text.substr(0, 200)) {
    const auto u = static_cast<unsigned char>(ch);
    out += (u < 0x20 || u == 0x7f) ? strprintf("\\x%02x", u) : std::string(1, ch);
  }
  if (text.size() > 200) out += "...";
  return out;
}

bool is_key_char(char ch) {
  return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
         ch == '_' || ch == '-';
}

// Index of the quote that closes the quoted scalar starting at value[0] ('' escapes ' in single
// quotes, \ escapes in double quotes), or npos.
size_t closing_quote(const std::string& value) {
  const char quote = value[0];
  for (size_t i = 1; i < value.size(); ++i) {
    if (quote == '"' && value[i] == '\\') {
      ++i;
    } else if (value[i] == quote) {
      if (quote == '\'' && i + 1 < value.size() && value[i + 1] == '\'') {
        ++i;
      } else {
        return i;
      }
    }
  }
  return std::string::npos;
}

// yaml-cpp stops at the end of the first value and ignores the rest ("[a] b" reads as [a], "a #b"
// as a), and reads a leading ',' as null: accept only a parse that covers the whole text.
bool whole_value_read(const YAML::Node& node, const std::string& value) {
  const char first = value.front();
  const char last = value.back();
  switch (node.Type()) {
    case YAML::NodeType::Null:
      return value == "null" || value == "Null" || value == "NULL" || value == "~";
    case YAML::NodeType::Scalar:
      if (first == '\'' || first == '"') return closing_quote(value) == value.size() - 1;
      return node.Scalar() == value;
    case YAML::NodeType::Sequence:
      return first == '[' && last == ']';
    case YAML::NodeType::Map:
      return first == '{' && last == '}';
    default:
      return false;
  }
}

// Keys whose value names a file or a directory. For these an empty value is refused rather than read as null:
// `checkpoint.pretrained_checkpoint=$DIR` with DIR unset would otherwise silently train from a random init (and an
// empty checkpoint.load resume nothing, an empty data_path train on nothing). null still unsets them.
bool is_path_key(const std::string& key) {
  static constexpr std::string_view kPathKeys[] = {
      "checkpoint.save",           "checkpoint.load",   "checkpoint.pretrained_checkpoint",
      "tokenizer.tokenizer_model", "dataset.data_path", "dataset.valid_data_path",
      "logger.tensorboard_dir"};
  return std::find(std::begin(kPathKeys), std::end(kPathKeys), key) != std::end(kPathKeys);
}

// An override key's parts. Megatron's model.transformer.KEY (the TransformerConfig a Bridge GPT or hybrid model config
// holds) is model.KEY here, as Bridge's attribute proxy reads it.
std::vector<std::string> override_key_parts(const std::string& key) {
  std::vector<std::string> parts = split(key, '.');
  if (parts.size() == 3 && parts[0] == "model" && parts[1] == "transformer") parts.erase(parts.begin() + 1);
  return parts;
}

}  // namespace

bool looks_like_override(std::string_view text) { return text.find('=') != std::string_view::npos; }

bool looks_like_dotted_override(std::string_view text) {
  const size_t eq = text.find('=');
  if (eq == std::string_view::npos) return false;
  const std::string key = trim(text.substr(0, eq));
  if (!std::all_of(key.begin(), key.end(), [](char ch) { return is_key_char(ch) || ch == '.'; })) return false;
  const auto parts = override_key_parts(key);
  return parts.size() == 2 && !parts[0].empty() && !parts[1].empty();
}

bool is_recipe_argument(const std::string& argument) {
  std::error_code ec;
  return !looks_like_override(argument) || std::filesystem::is_regular_file(argument, ec);
}

void apply_override(Config& config, std::string_view override_text) {
  const std::string shown = printable(override_text);
  const std::string where = "override '" + shown + "'";
  const auto malformed = [&](const std::string& why) {
    return ConfigError(where + ": " + why +
                       "; write section.key=value, e.g. model.cuda_graph_scope=attn,mlp or "
                       "train.train_iters=50");
  };
  if (override_text.size() > kMaxOverrideLength) throw malformed("too long");
  const size_t eq = override_text.find('=');
  if (eq == std::string_view::npos) throw malformed("no '='");
  const std::string key = trim(override_text.substr(0, eq));
  const std::string value = trim(override_text.substr(eq + 1));
  if (key.empty()) throw malformed("no key before '='");
  if (!std::all_of(key.begin(), key.end(), [](char ch) { return is_key_char(ch) || ch == '.'; })) {
    throw malformed("the key '" + printable(key) +
                    "' has characters other than letters, digits, _ and .");
  }
  // Bridge's mixed_precision=bf16_mixed: a recipe's name for the whole section.
  if (key == "mixed_precision") {
    if (value == "null" || value == "~") {
      config.mixed_precision = {};  // Bridge's None: no section
    } else {
      detail::assign_mixed_precision_recipe(config, value, where);
    }
    return;
  }
  const auto parts = override_key_parts(key);
  if (parts.size() != 2 || parts[0].empty() || parts[1].empty()) {
    throw malformed("the key '" + key + "' is not of the form section.key");
  }
  const auto sections = config_sections();
  if (std::find(sections.begin(), sections.end(), parts[0]) == sections.end()) {
    throw ConfigError(where + ": " + detail::unknown_section_message(parts[0]));
  }
  const int brackets = static_cast<int>(
      std::count_if(value.begin(), value.end(), [](char ch) { return ch == '[' || ch == '{'; }));
  if (brackets > kMaxBrackets) throw malformed("the value nests too deeply");

  const std::string dotted_key = parts[0] + "." + parts[1];  // model.transformer.X is model.X
  if (value.empty() && is_path_key(dotted_key)) {
    throw ConfigError(where + ": " + dotted_key +
                      " is a path and the value is empty (an unset shell variable?); give a path, or write " +
                      dotted_key + "=null to unset it");
  }
  // Megatron's null recompute_modules is its default list, not none: an empty value (an unset shell variable) would
  // turn selective recompute of core_attn on unasked.
  if (value.empty() && dotted_key == "model.recompute_modules") {
    throw ConfigError(where +
                      ": model.recompute_modules is empty (an unset shell variable?); give the modules "
                      "(e.g. core_attn,mlp), [] for none, or null for Megatron's default [core_attn]");
  }
  YAML::Node node;  // an empty value is null: it unsets an optional key or empties a list
  if (!value.empty()) {
    if (value.find('\n') != std::string::npos || value.find('\r') != std::string::npos) {
      throw malformed("the value spans several lines");
    }
    bool yaml = true;
    std::string yaml_error;
    try {
      // YAML::Load, not LoadAll: yaml-cpp 0.7's LoadAll never returns on some inputs (a leading
      // ',').
      node = YAML::Load(value);
    } catch (const YAML::Exception& e) {
      yaml = false;
      yaml_error = e.msg;
    }
    if (!yaml && detail::is_string_key(parts[0], parts[1])) {
      // A string key takes text that is no YAML as typed: model.hybrid_override_pattern=*-*- is not
      // an alias. (Text that is YAML but more than one value, "dir #x", stays an error.)
      node = YAML::Node(value);
    } else if (!yaml) {
      throw ConfigError(strprintf("%s: the value '%s' is not a YAML value: %s", where.c_str(),
                                  printable(value).c_str(), yaml_error.c_str()));
    } else if (!whole_value_read(node, value)) {
      throw malformed("the value '" + printable(value) +
                      "' is not one YAML value (a scalar, or a list written [a, b] or a,b; quote "
                      "strings that hold # or trailing text)");
    }
  }
  try {
    if (!detail::assign_key(config, parts[0], parts[1], node, where)) {
      throw ConfigError(where + ": " + detail::unknown_key_message(parts[0], parts[1]));
    }
  } catch (const YAML::Exception& e) {
    throw ConfigError(strprintf("%s: %s", where.c_str(), e.msg.c_str()));
  }
}

void apply_overrides(Config& config, const std::vector<std::string>& overrides) {
  for (const auto& o : overrides) apply_override(config, o);
}

}  // namespace sg::config
