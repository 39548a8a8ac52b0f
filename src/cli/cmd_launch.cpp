// stepgraph launch -n N [--master-addr A] [--master-port P] [--kill-grace S] -- COMMAND [ARGS...]
// Starts N ranks of `stepgraph COMMAND ARGS...` on this node (dist/local_launcher.h): one per GPU for
// data parallelism, as `torchrun --standalone --nproc-per-node N` would. Exit status: the failing rank's.
#include <unistd.h>

#include <climits>
#include <cstdio>
#include <memory>

#include "cli/command.h"
#include "core/error.h"
#include "core/strings.h"
#include "dist/local_launcher.h"

namespace sg::cli {
namespace {

struct LaunchArgs {
  int num_ranks = 1;
  std::string master_addr = "127.0.0.1";
  int master_port = 0;
  double kill_grace = 5.0;
  std::vector<std::string> command;  // the first words of the rank's command (CLI11 positionals)
};

std::string this_executable() {
  char path[PATH_MAX] = {0};
  const ssize_t n = ::readlink("/proc/self/exe", path, sizeof(path) - 1);
  SG_CHECK(n > 0, "stepgraph launch: cannot find its own executable (/proc/self/exe)");
  return std::string(path, static_cast<size_t>(n));
}

int run_launch(const LaunchArgs& args, std::vector<std::string> command) {
  if (!command.empty() && command.front() == "--") command.erase(command.begin());
  if (command.empty()) {
    std::fprintf(stderr, "error: stepgraph launch needs a command after --, e.g. stepgraph launch -n 2 -- train "
                         "llama/tiny\n");
    return 2;
  }
  if (command.front() == "launch") {
    std::fprintf(stderr, "error: stepgraph launch cannot launch itself\n");
    return 2;
  }
  dist::LaunchOptions options;
  options.num_ranks = args.num_ranks;
  options.master_addr = args.master_addr;
  options.master_port = args.master_port;
  options.kill_grace_seconds = args.kill_grace;
  options.argv.push_back(this_executable());
  options.argv.insert(options.argv.end(), command.begin(), command.end());
  const dist::LaunchResult result = dist::launch_local(options);
  if (result.exit_code != 0) std::fprintf(stderr, "stepgraph launch: %s\n", result.summary.c_str());
  return result.exit_code;
}

const CommandRegistration kRegistration{"launch", 12, [](CLI::App& app, int& exit_code) {
  auto args = std::make_shared<LaunchArgs>();
  CLI::App* cmd = app.add_subcommand(
      "launch",
      "Start N ranks of a stepgraph command on this node, one per GPU (data parallelism), with the environment "
      "torchrun sets (RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT). Ctrl-C and SIGTERM reach every rank; "
      "when one rank fails the others are ended within seconds and the exit status is the failing rank's.");
  cmd->add_option("-n,--nproc", args->num_ranks, "number of ranks (GPUs) to start")
      ->required()
      ->check(integer_in_range(1, 1024));
  // An empty address would reach the ranks as MASTER_ADDR= , which they read as unset.
  cmd->add_option("--master-addr", args->master_addr, "address of rank 0's rendezvous store (default 127.0.0.1)")
      ->check(CLI::Validator(
          [](std::string& text) -> std::string {
            return trim(text).empty() ? "is empty: give rank 0's host name or IP address (default 127.0.0.1)" : "";
          },
          "ADDRESS"));
  cmd->add_option("--master-port", args->master_port, "its port (default: a free one)")
      ->check(integer_in_range(0, 65535));
  cmd->add_option("--kill-grace", args->kill_grace,
                  "seconds between SIGTERM and SIGKILL for ranks left after a failure (default 5)")
      ->check(positive_number());
  cmd->footer("Examples:\n"
              "  stepgraph launch -n 2 -- train llama/small train.train_iters=100\n"
              "  stepgraph launch -n 8 -- train llama/1b optimizer.use_distributed_optimizer=true\n"
              "torchrun (with --no-python) and srun work too: stepgraph train reads "
              "RANK/WORLD_SIZE/LOCAL_RANK/MASTER_ADDR/MASTER_PORT or SLURM_PROCID/SLURM_NTASKS/SLURM_LOCALID; rank 0's "
              "store listens on MASTER_PORT (MASTER_PORT + 1 under torchrun's agent store; STEPGRAPH_STORE_PORT sets "
              "it). See docs/distributed.md.");
  // The rank's command, unparsed: after `--` CLI11 hands it to the positional; without `--`, the first
  // word goes there and prefix_command() leaves the rest in remaining().
  cmd->add_option("command", args->command, "the stepgraph command every rank runs, after --");
  cmd->prefix_command();
  cmd->callback([cmd, args, &exit_code] {
    try {
      std::vector<std::string> command = args->command;
      std::vector<std::string> rest = cmd->remaining();
      if (!rest.empty() && rest.front() == "--") rest.erase(rest.begin());
      command.insert(command.end(), rest.begin(), rest.end());
      exit_code = run_launch(*args, command);
    } catch (const Error& e) {
      std::fprintf(stderr, "error: %s\n", e.what());
      exit_code = 1;
    }
  });
}};

}  // namespace
}  // namespace sg::cli
