#pragma once
// Each `stepgraph <command>` lives in its own src/cli/cmd_<name>.cpp and registers itself here with a
// static CommandRegistration, so adding a command touches no other file.
#include <CLI/CLI.hpp>

#include <functional>
#include <string>
#include <vector>

namespace sg::cli {

// Adds the subcommand to `app`. The callback it installs returns the process exit code through
// `exit_code` (0 ok, 1 the request failed — invalid config, bad data —, 2 usage or parse error).
using CommandSetup = std::function<void(CLI::App& app, int& exit_code)>;

struct CommandInfo {
  std::string name;
  int order;  // position in --help
  CommandSetup setup;
};

std::vector<CommandInfo>& command_registry();

// CLI11's PositiveNumber and NonNegativeNumber print their range up to DBL_MAX (300 digits); these say
// "must be positive (got 0)".
CLI::Validator positive_number();
CLI::Validator non_negative_number();

// "unknown command 'trian' (did you mean 'train'?); the commands: ..." when the words of argv name a
// subcommand that does not exist (CLI11 says only "A subcommand is required"), else "".
std::string unknown_subcommand_message(const CLI::App& app, int argc, const char* const* argv);

struct CommandRegistration {
  CommandRegistration(std::string name, int order, CommandSetup setup) {
    command_registry().push_back({std::move(name), order, std::move(setup)});
  }
};

}  // namespace sg::cli
