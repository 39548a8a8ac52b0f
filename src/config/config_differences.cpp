#include "config/config_differences.h"

#include <map>
#include <utility>

namespace sg::config {

namespace {

constexpr std::string_view kSeparator = " = ";
constexpr const char* kNoSuchKey = "(no such key)";

// The (key, value) pairs of a key_value_lines text, in order; a line without the separator is a key with no value.
std::vector<std::pair<std::string, std::string>> parse_lines(std::string_view text) {
  std::vector<std::pair<std::string, std::string>> out;
  while (!text.empty()) {
    const size_t end = text.find('\n');
    const std::string_view line = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
    if (line.empty()) continue;
    const size_t at = line.find(kSeparator);
    if (at == std::string_view::npos) {
      out.emplace_back(std::string(line), "");
    } else {
      out.emplace_back(std::string(line.substr(0, at)), std::string(line.substr(at + kSeparator.size())));
    }
  }
  return out;
}

}  // namespace

std::string key_value_lines(const Config& config) {
  std::string out;
  for (const std::string& key : config_keys()) {
    out += key;
    out += kSeparator;
    out += format_value(config, key);
    out += '\n';
  }
  return out;
}

std::vector<KeyDifference> key_differences(std::string_view a, std::string_view b) {
  const auto a_lines = parse_lines(a), b_lines = parse_lines(b);
  std::map<std::string, std::string, std::less<>> b_values(b_lines.begin(), b_lines.end());
  std::vector<KeyDifference> out;
  for (const auto& [key, value] : a_lines) {
    const auto it = b_values.find(key);
    if (it == b_values.end()) {
      out.push_back({key, value, kNoSuchKey});
      continue;
    }
    if (it->second != value) out.push_back({key, value, it->second});
    b_values.erase(it);
  }
  for (const auto& [key, value] : b_lines) {
    if (b_values.count(key) != 0) out.push_back({key, kNoSuchKey, value});
  }
  return out;
}

}  // namespace sg::config
