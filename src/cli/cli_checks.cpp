// Argument checks shared by the commands: number validators with plain messages, and the answer to a
// mistyped command.
#include <cstdlib>
#include <string>
#include <vector>

#include "cli/command.h"
#include "core/strings.h"

namespace sg::cli {
namespace {

CLI::Validator number_at_least(bool allow_zero) {
  return CLI::Validator(
      [allow_zero](std::string& text) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(text.c_str(), &end);
        if (text.empty() || end == nullptr || *end != '\0') return "'" + text + "' is not a number";
        if (allow_zero ? v < 0 : v <= 0) {
          return std::string(allow_zero ? "must be 0 or more" : "must be positive") + " (got " + text + ")";
        }
        return "";
      },
      allow_zero ? ">= 0" : "> 0");
}

}  // namespace

CLI::Validator positive_number() {
  return number_at_least(false);
}
CLI::Validator non_negative_number() {
  return number_at_least(true);
}

std::string unknown_subcommand_message(const CLI::App& app, int argc, const char* const* argv) {
  const CLI::App* current = &app;
  std::string path;
  for (int i = 1; i < argc; ++i) {
    const std::string word = argv[i];
    if (word.empty() || word[0] == '-') continue;  // at these levels options take no values
    const std::vector<const CLI::App*> subcommands = current->get_subcommands([](const CLI::App*) { return true; });
    if (subcommands.empty()) return "";  // a command's own arguments
    std::vector<std::string> names;
    const CLI::App* next = nullptr;
    for (const CLI::App* sub : subcommands) {
      names.push_back(sub->get_name());
      if (sub->get_name() == word) next = sub;
    }
    if (next == nullptr) {
      const std::string near = closest_match(word, names);
      return "unknown command '" + path + word + "'" + (near.empty() ? "" : " (did you mean '" + path + near + "'?)") +
             "; the commands: " + join(names, ", ") + " (stepgraph " + path + "--help)";
    }
    path += word + " ";
    current = next;
  }
  return "";
}

}  // namespace sg::cli
