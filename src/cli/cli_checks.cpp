// Argument checks shared by the commands: number validators with plain messages, and the answer to a
// mistyped command.
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "cli/command.h"
#include "core/strings.h"
#include "dist/world_env.h"

namespace sg::cli {
namespace {

CLI::Validator number_at_least(bool allow_zero) {
  return CLI::Validator(
      [allow_zero](std::string& text) -> std::string {
        char* end = nullptr;
        const double v = std::strtod(text.c_str(), &end);
        if (text.empty() || end == nullptr || *end != '\0') return "'" + text + "' is not a number";
        // NaN compares false with everything (it would pass the check below), and no count or number of
        // seconds here is infinite: a timer of inf or nan seconds never fires.
        if (!std::isfinite(v)) return "must be a finite number (got " + text + ")";
        if (allow_zero ? v < 0 : v <= 0) {
          return std::string(allow_zero ? "must be 0 or more" : "must be positive") + " (got " + text + ")";
        }
        return "";
      },
      allow_zero ? ">= 0" : "> 0");
}

}  // namespace

CLI::Validator seed_number() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        uint64_t seed = 0;
        const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), seed);
        if (text.empty() || ec != std::errc() || end != text.data() + text.size()) {
          return "'" + text + "': give a whole number from 0 to 18446744073709551615";
        }
        return "";
      },
      "0 to 2^64 - 1");
}

CLI::Validator integer_in_range(long long lo, long long hi) {
  return CLI::Validator(
      [lo, hi](std::string& text) -> std::string {
        char* end = nullptr;
        errno = 0;
        const long long v = std::strtoll(text.c_str(), &end, 10);
        if (text.empty() || end == nullptr || *end != '\0' || errno == ERANGE) {
          return "'" + text + "' is not an integer";
        }
        if (v < lo || v > hi) return strprintf("must be an integer in [%lld, %lld] (got %s)", lo, hi, text.c_str());
        return "";
      },
      strprintf("INT in [%lld, %lld]", lo, hi));
}

int64_t data_parallel_size_from_env() {
  const dist::EnvLookup env = dist::process_environment();
  const bool torchrun = env("WORLD_SIZE").has_value();
  return dist::world_from_env([&env, torchrun](const std::string& name) -> std::optional<std::string> {
           std::optional<std::string> value = env(name);
           if (!value && torchrun && (name == "RANK" || name == "LOCAL_RANK")) value = "0";
           return value;
         })
      .world_size;
}

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

void add_config_file_option(CLI::App& command, std::vector<std::string>& files) {
  command
      .add_option("--config-file", files,
                  "a YAML file of keys to set over the recipe, in the recipe's layout (Megatron-Bridge's "
                  "--config-file: e.g. train: {train_iters: 100}); applied before the dotted overrides; "
                  "repeatable, in order")
      ->allow_extra_args(false);  // one file a flag: the words after it are the recipe and overrides
}

}  // namespace sg::cli
