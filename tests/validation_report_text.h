#pragma once
// A validation report as text, for a failing assertion's message: every violation, then every note; and
// whether a violation names a key; a shipped recipe with overrides, validated.
#include <algorithm>
#include <string>
#include <vector>

#include "config/config.h"
#include "config/validate.h"

namespace sg::test {

inline std::string describe(const config::ValidationReport& r) {
  std::string out;
  for (const auto& v : r.violations) out += config::format_violation(v);
  for (const auto& n : r.notes) out += config::format_note(n);
  return out;
}

inline config::ValidationReport check_recipe(const char* recipe, const std::vector<std::string>& overrides = {}) {
  return config::validate(config::load_config(recipe, overrides));
}

inline bool names_key(const config::Violation& v, const std::string& key) {
  return std::any_of(v.values.begin(), v.values.end(), [&](const config::KeyValue& kv) { return kv.key == key; });
}

}  // namespace sg::test
