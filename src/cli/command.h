#pragma once
// Each `stepgraph <command>` lives in its own src/cli/cmd_<name>.cpp and registers itself here with a
// static CommandRegistration, so adding a command touches no other file.
#include <CLI/CLI.hpp>
#include <cstdint>
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
// A whole decimal integer in [lo, hi]: "'abc' is not an integer", "must be an integer in [1, 1024] (got 0)"
// (CLI11's Range says "Value abc not in range 1 to 1024" for a word).
CLI::Validator integer_in_range(long long lo, long long hi);
// A seed, read exactly: a whole decimal number from 0 to 2^64 - 1 (CLI11 alone wraps -5 and saturates 2^64 and more
// into valid seeds, so different arguments gave the same draws).
CLI::Validator seed_number();

// --config-file FILE (repeatable) on train, validate and config show: Bridge's YAML of overrides, set over the recipe
// before the dotted overrides (config::merge_config_file).
void add_config_file_option(CLI::App& command, std::vector<std::string>& files);

// The number of ranks the launcher's environment describes (WORLD_SIZE, or SLURM_NTASKS in an srun task), as
// `train` reads it: Megatron's data_parallel_size, which the batch must divide. `validate` and `config show`
// resolve the config as any rank of that world sees it, so a WORLD_SIZE without this process's RANK /
// LOCAL_RANK counts as rank 0. Throws sg::Error naming a malformed variable.
int64_t data_parallel_size_from_env();

// "unknown command 'trian' (did you mean 'train'?); the commands: ..." when the words of argv name a
// subcommand that does not exist (CLI11 says only "A subcommand is required"), else "".
std::string unknown_subcommand_message(const CLI::App& app, int argc, const char* const* argv);

struct CommandRegistration {
  CommandRegistration(std::string name, int order, CommandSetup setup) {
    command_registry().push_back({std::move(name), order, std::move(setup)});
  }
};

}  // namespace sg::cli
