// YAML -> Config: a recipe's text read as one map of sections, with errors that name the file, line and column;
// every key must exist (an unknown key or section names the closest valid one), and assign_key
// (config_yaml_assign.cpp) type-checks and sets each value. A saved Bridge config's layout is read too: its `_target_`
// keys are skipped and the keys of its model.transformer map are model keys.
#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <set>
#include <utility>
#include <vector>

#include "config/config.h"
#include "config/config_detail.h"
#include "config/mixed_precision.h"
#include "core/strings.h"

namespace sg::config::detail {

std::string position(const std::string& source, const YAML::Mark& mark) {
  if (mark.is_null()) return source;
  return strprintf("%s:%d:%d", source.c_str(), mark.line + 1, mark.column + 1);
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
