#pragma once
// Tests that run the stepgraph binary (or a script) as a user would: a shell command, its exit status
// and its output; or, for a test that forks the binary itself, its argv (StepgraphArgv).
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

namespace sg::test {

// The stepgraph binary of the build this test belongs to: $STEPGRAPH_BIN (ctest sets it), else
// BUILD/src/stepgraph found from this executable's own path (BUILD/tests/<test>), else the path
// configured at build time. So a build folder that was copied or moved (the GPU machine runs a copy)
// still runs its own binary.
inline std::string stepgraph_binary() {
  if (const char* env = std::getenv("STEPGRAPH_BIN"); env != nullptr && *env != '\0') return env;
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const std::filesystem::path sibling = self.parent_path().parent_path() / "src" / "stepgraph";
    if (std::filesystem::is_regular_file(sibling, ec)) return sibling.string();
  }
  return STEPGRAPH_BIN;
}

// The source tree the test's scripts live in: $STEPGRAPH_SOURCE_DIR, else the folder above this executable's build
// folder (ROOT/BUILD/tests/<test>) where it holds tests/process_util.h, else the path configured at build time. So
// a checkout copied to another path (the GPU machine's) finds its own scripts.
inline std::string stepgraph_source_dir() {
  if (const char* env = std::getenv("STEPGRAPH_SOURCE_DIR"); env != nullptr && *env != '\0') return env;
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const std::filesystem::path root = self.parent_path().parent_path().parent_path();
    if (std::filesystem::is_regular_file(root / "tests" / "process_util.h", ec)) return root.string();
  }
  return STEPGRAPH_SOURCE_DIR;
}

// The stepgraph binary with args..., as execv takes it; built before the fork, so the child only execs.
class StepgraphArgv {
 public:
  explicit StepgraphArgv(const std::vector<std::string>& args) : strings_{stepgraph_binary()} {
    strings_.insert(strings_.end(), args.begin(), args.end());
    for (auto& a : strings_) pointers_.push_back(a.data());
    pointers_.push_back(nullptr);
  }
  StepgraphArgv(const StepgraphArgv&) = delete;  // pointers_ point into strings_
  StepgraphArgv& operator=(const StepgraphArgv&) = delete;
  // In the child: exec, or exit 127 (the shell's "command not found").
  [[noreturn]] void exec() {
    ::execv(pointers_[0], pointers_.data());
    ::_exit(127);
  }

 private:
  std::vector<std::string> strings_;
  std::vector<char*> pointers_;
};

struct CommandResult {
  int exit_code = -1;  // -1: did not start or did not exit normally
  std::string output;  // stdout, plus stderr when the command merges it
};

// 'arg' with single quotes escaped, for /bin/sh.
inline std::string shell_quote(const std::string& arg) {
  std::string out = "'";
  for (const char ch : arg) out.append(ch == '\'' ? std::string("'\\''") : std::string(1, ch));
  out.push_back('\'');
  return out;
}

// Runs `command` with /bin/sh and collects its stdout.
inline CommandResult run_command(const std::string& command) {
  CommandResult result;
  FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) return result;
  char buffer[4096];
  size_t n = 0;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) result.output.append(buffer, n);
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

// Runs the stepgraph binary with `args` (each quoted); stderr merged into the output unless
// merge_stderr is false (then discarded); from `cwd` when given.
inline CommandResult run_stepgraph(const std::vector<std::string>& args, bool merge_stderr = true,
                                   const std::string& cwd = "") {
  std::string command;
  if (!cwd.empty()) command.append("cd ").append(shell_quote(cwd)).append(" && ");
  command.append(shell_quote(stepgraph_binary()));
  for (const auto& a : args) command.append(" ").append(shell_quote(a));
  command += merge_stderr ? " 2>&1" : " 2>/dev/null";
  return run_command(command);
}

}  // namespace sg::test
