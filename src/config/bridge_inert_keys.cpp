// The checks of the Megatron-Bridge keys stepgraph accepts without implementing them (bridge_inert_keys.h).
#include "config/bridge_inert_keys.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <type_traits>

#include "config/config.h"
#include "config/config_detail.h"
#include "config/validate.h"
#include "core/strings.h"

namespace sg::config {

namespace detail {
std::optional<std::string> yaml_bool(std::string_view text) {
  std::string l;
  for (const char ch : text) l += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  if (l == "true" || l == "yes" || l == "on") return "true";
  if (l == "false" || l == "no" || l == "off") return "false";
  return std::nullopt;
}
}  // namespace detail

namespace {
using detail::yaml_bool;

// A decimal number written in full (digits, sign, point, exponent: no "inf", "nan" or hex), or nullopt.
std::optional<double> yaml_number(std::string_view text) {
  const bool number_chars = !text.empty() && text.find_first_not_of("0123456789+-.eE") == std::string_view::npos;
  if (!number_chars || text.find_first_of("0123456789") == std::string_view::npos) return std::nullopt;
  const std::string s(text);
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size()) return std::nullopt;
  return v;
}

// Whether two written values mean the same: numbers by value (0, 0.0, 0e0), booleans by truth (true, yes, on).
bool same_value(std::string_view a, std::string_view b) {
  const auto na = yaml_number(a), nb = yaml_number(b);
  if (na && nb) return *na == *nb;
  const auto ba = yaml_bool(a), bb = yaml_bool(b);
  if (ba && bb) return *ba == *bb;
  return a == b;
}

std::string dotted(const BridgeInertKey& k) { return std::string(k.section) + "." + k.key; }

// The values that change nothing, each as written in the docs; empty for `any` (every value) and for a key only
// unset leaves neutral.
std::vector<std::string> neutral_values(const BridgeInertKey& key) {
  if (key.accepts == InertValues::any_bool || key.accepts == InertValues::copied) return {"true", "false"};
  std::vector<std::string> out;
  if (key.accepts == InertValues::listed) {
    for (const std::string& value : split(key.neutral, ',')) {
      if (!trim(value).empty()) out.push_back(trim(value));
    }
  }
  return out;
}

}  // namespace

const BridgeInertKey* find_bridge_inert_key(std::string_view section, std::string_view key) {
  for (const BridgeInertKey& k : kBridgeInertKeys) {
    if (section == k.section && key == k.key) return &k;
  }
  return nullptr;
}

bool bridge_inert_neutral(const BridgeInertKey& key, std::string_view value) {
  if (key.accepts == InertValues::any) return true;
  const std::vector<std::string> neutral = neutral_values(key);
  return std::any_of(neutral.begin(), neutral.end(), [&](const std::string& n) { return same_value(n, value); });
}

std::string bridge_inert_neutral_text(const BridgeInertKey& key) {
  if (key.accepts == InertValues::any) return "any";
  const std::vector<std::string> values = neutral_values(key);
  return values.empty() ? "null only" : join(values, ", ");
}

namespace detail {

std::string format_yaml(const BridgeInertValue& value) {
  if (!value.text) return "null";
  // Unquoted, these read back as the same text; quoting them would show `true` as the string "true".
  if (yaml_bool(*value.text) || yaml_number(*value.text)) return *value.text;
  return format_yaml(*value.text);
}

void check_bridge_inert_keys(const Config& config, std::vector<Violation>& violations, std::vector<Note>& notes) {
  // The neutral ones, grouped by why they change nothing (the four W&B keys share one reason).
  std::vector<KeyValue> noted;
  std::vector<std::pair<std::string, std::vector<std::string>>> reasons;  // effect -> its keys, in table order
  visit_fields(config, [&](std::string_view section, std::string_view key, const auto& member, const char*) {
    if constexpr (std::is_same_v<std::decay_t<decltype(member)>, BridgeInertValue>) {
      if (!member) return;
      const BridgeInertKey& k = *find_bridge_inert_key(section, key);
      const std::string name = dotted(k), shown = format_yaml(member);
      if (!bridge_inert_neutral(k, *member.text)) {
        const std::vector<std::string> neutral = neutral_values(k);
        violations.push_back(
            {16,
             strprintf("stepgraph does not implement %s = %s (in Megatron: %s)", name.c_str(), shown.c_str(), k.what),
             {{name, shown}},
             "remove " + name +
                 (neutral.empty() ? "" : ", or set it to " + join(neutral, " or ") + " (no effect here)")});
        return;
      }
      if (k.accepts == InertValues::copied) return;  // it has an effect: apply_mixed_precision notes it
      noted.push_back({name, shown});
      const std::string effect = k.effect;
      auto it = std::find_if(reasons.begin(), reasons.end(), [&](const auto& r) { return r.first == effect; });
      if (it == reasons.end()) it = reasons.insert(reasons.end(), {effect, {}});
      it->second.push_back(name);
    }
  });
  if (noted.empty()) return;
  std::vector<std::string> parts;
  for (const auto& [effect, keys] : reasons) parts.push_back(join(keys, ", ") + ": " + effect);
  notes.push_back({16, "accepted from Megatron-Bridge, no effect in stepgraph: " + join(parts, "; "), noted});
}

}  // namespace detail
}  // namespace sg::config
