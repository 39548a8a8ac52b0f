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

struct CommandRegistration {
  CommandRegistration(std::string name, int order, CommandSetup setup) {
    command_registry().push_back({std::move(name), order, std::move(setup)});
  }
};

}  // namespace sg::cli
