// Config -> YAML text that load_config_yaml reads back to the same config (tested round trip).
#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <type_traits>

#include "config/config.h"
#include "config/config_detail.h"
#include "config/moe_layer_freq.h"
#include "core/strings.h"

namespace sg::config::detail {
namespace {

bool plain_safe_char(char ch) {
  return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
         ch == '_' || ch == '.' || ch == '/' || ch == '-';
}

// Words YAML 1.1 reads as something other than a string.
bool reserved_word(const std::string& s) {
  static const char* words[] = {"null", "~", "true", "false", "yes", "no", "on", "off", "y", "n"};
  std::string l;
  for (const char ch : s) l += static_cast<char>(ch >= 'A' && ch <= 'Z' ? ch - 'A' + 'a' : ch);
  for (const char* w : words) {
    if (l == w) return true;
  }
  return false;
}

}  // namespace

std::string format_yaml(bool v) { return v ? "true" : "false"; }

std::string format_yaml(int64_t v) { return strprintf("%lld", static_cast<long long>(v)); }

// The shortest decimal that reads back to the same double, always recognisable as a float.
std::string format_yaml(double v) {
  if (std::isnan(v)) return ".nan";
  if (std::isinf(v)) return v > 0 ? ".inf" : "-.inf";
  std::string text;
  const double magnitude = std::fabs(v);
  if (magnitude >= 1e-4 && magnitude < 1e16) {  // plain decimals read best here: 10000.0, 0.0003
    for (int decimals = 0; decimals <= 20; ++decimals) {
      text = strprintf("%.*f", decimals, v);
      if (std::strtod(text.c_str(), nullptr) == v) break;
    }
  }
  if (text.empty() || std::strtod(text.c_str(), nullptr) != v) {
    for (int precision = 1; precision <= 17; ++precision) {
      text = strprintf("%.*g", precision, v);
      if (std::strtod(text.c_str(), nullptr) == v) break;
    }
  }
  if (text.find_first_of(".eE") == std::string::npos) text += ".0";
  return text;
}

// Plain when it cannot be misread (paths, identifiers), double-quoted with escapes otherwise.
std::string format_yaml(const std::string& v) {
  bool plain = !v.empty() && !reserved_word(v);
  for (const char ch : v) plain = plain && plain_safe_char(ch);
  // Anything starting like a number or a YAML indicator is quoted ("1b", "-x", ".5").
  if (plain && ((v[0] >= '0' && v[0] <= '9') || v[0] == '-' || v[0] == '.')) plain = false;
  if (plain) return v;
  std::string out = "\"";
  for (const char ch : v) {
    const auto u = static_cast<unsigned char>(ch);
    if (ch == '"' || ch == '\\') {
      out += '\\';
      out += ch;
    } else if (ch == '\n') {
      out += "\\n";
    } else if (ch == '\t') {
      out += "\\t";
    } else if (u < 0x20 || u == 0x7f) {
      out += strprintf("\\x%02x", u);
    } else {
      out += ch;
    }
  }
  out += '"';
  return out;
}

std::string format_yaml(const std::vector<double>& v) {
  std::vector<std::string> items;
  for (const double x : v) items.push_back(format_yaml(x));
  return "[" + join(items, ", ") + "]";
}

std::string format_yaml(const std::vector<std::string>& v) {
  std::vector<std::string> items;
  for (const auto& s : v) items.push_back(format_yaml(s));
  std::string out = "[";
  out += join(items, ", ");
  out += ']';
  return out;
}

}  // namespace sg::config::detail

namespace sg::config {

std::string emit_yaml(const Config& config, const std::string& header, EmitDerived derived) {
  std::string out;
  if (!header.empty()) {
    for (const auto& line : split(header, '\n')) {
      out += line.empty() ? "#" : "# ";
      out += line;
      out += '\n';
    }
  }
  std::string_view current_section;
  visit_fields(
      config, [&](std::string_view section, std::string_view key, const auto& member, const char* doc) {
        // A Bridge key stepgraph only accepts (config/bridge_inert_keys.h) prints only when set: `config show` and
        // a run's config.yaml offer no feature stepgraph lacks, and the YAML (and the checkpoints' config hash) of
        // a config without them is what it was before they were known. Unset reads back as unset.
        if constexpr (std::is_same_v<std::decay_t<decltype(member)>, BridgeInertValue>) {
          if (!member) return;
        }
        if (section != current_section) {
          out += section;
          out += ":\n";
          current_section = section;
        }
        out += "  ";
        out += key;
        out += ": ";
        const std::string value = detail::format_field(section, key, member);
        const std::string dotted = std::string(section) + "." + std::string(key);
        if (derived == EmitDerived::as_null &&
            std::find(config.derived_keys.begin(), config.derived_keys.end(), dotted) != config.derived_keys.end()) {
          out += "null  # = " + value + " (" + doc + ")";
        } else {
          out += value;
        }
        out += '\n';
      });
  return out;
}

}  // namespace sg::config
