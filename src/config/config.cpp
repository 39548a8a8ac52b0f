// The key table's derived views: dotted keys, sections, one value as YAML text.
#include "config/config.h"

#include "core/strings.h"
#include "config/config_detail.h"

namespace sg::config {

std::vector<std::string> config_keys() {
  std::vector<std::string> keys;
  const Config defaults;
  visit_fields(defaults, [&](std::string_view s, std::string_view k, const auto&, const char*) {
    keys.push_back(std::string(s) + "." + std::string(k));
  });
  return keys;
}

std::vector<std::string> config_sections() {
  std::vector<std::string> sections;
  const Config defaults;
  visit_fields(defaults, [&](std::string_view s, std::string_view, const auto&, const char*) {
    if (sections.empty() || sections.back() != s) sections.emplace_back(s);
  });
  return sections;
}

std::string format_value(const Config& config, std::string_view dotted_key) {
  std::string text;
  bool found = false;
  visit_fields(config,
               [&](std::string_view s, std::string_view k, const auto& member, const char*) {
                 if (found || dotted_key.size() != s.size() + 1 + k.size()) return;
                 if (dotted_key.substr(0, s.size()) != s || dotted_key[s.size()] != '.' ||
                     dotted_key.substr(s.size() + 1) != k) {
                   return;
                 }
                 found = true;
                 text = detail::format_field(s, k, member);  // as config show prints it (emit_yaml)
               });
  if (!found) {
    throw ConfigError(strprintf("unknown config key '%.*s'", static_cast<int>(dotted_key.size()),
                                dotted_key.data()));
  }
  return text;
}

}  // namespace sg::config
