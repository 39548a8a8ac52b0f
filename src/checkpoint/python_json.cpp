// checkpoint/python_json.h: Python's non-finite JSON constants, tagged.
#include "checkpoint/python_json.h"

#include <array>
#include <string_view>
#include <utility>

#include "core/error.h"
#include "core/strings.h"

namespace sg::checkpoint {

std::string json_with_tagged_non_finite(const std::string& text) {
  // Longest first: "-Infinity" before a bare "Infinity" could match its tail.
  static constexpr std::array<std::pair<std::string_view, std::string_view>, 3> kConstants = {{
      {"-Infinity", R"({"__float__": "-Infinity"})"},
      {"Infinity", R"({"__float__": "Infinity"})"},
      {"NaN", R"({"__float__": "NaN"})"},
  }};
  std::string out;
  out.reserve(text.size());
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char ch = text[i];
    if (in_string) {
      out += ch;
      if (ch == '\\' && i + 1 < text.size()) {
        out += text[++i];  // the escaped character, a quote included
      } else if (ch == '"') {
        in_string = false;
      }
      continue;
    }
    if (ch == '"') {
      in_string = true;
      out += ch;
      continue;
    }
    bool replaced = false;
    for (const auto& [constant, tagged] : kConstants) {
      if (std::string_view(text).substr(i, constant.size()) == constant) {
        out += tagged;
        i += constant.size() - 1;
        replaced = true;
        break;
      }
    }
    if (!replaced) out += ch;
  }
  return out;
}

nlohmann::json parse_python_json(const std::string& text, const std::string& path) {
  try {
    return nlohmann::json::parse(json_with_tagged_non_finite(text));
  } catch (const nlohmann::json::exception& e) {  // parse_error; out_of_range for a number past double (1e999)
    throw Error(strprintf("%s is not valid JSON: %s", path.c_str(), e.what()));
  }
}

}  // namespace sg::checkpoint
