#pragma once
// `stepgraph launch -n N -- COMMAND ...`: N ranks of one node, as torchrun --standalone would start them.
//
// Each rank is fork/exec'd with RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR,
// MASTER_PORT and STEPGRAPH_RUN_ID (one token per launch) added to the launcher's environment (which
// is passed on whole: NCCL_* settings reach every rank; but not TORCHELASTIC_USE_AGENT_STORE: no torchrun agent
// store holds this launch's MASTER_PORT, so rank 0 serves stepgraph's store on it). The ranks run in a process
// group of their own, so a terminal's Ctrl-C reaches only the launcher, which forwards every SIGINT/SIGTERM/SIGHUP
// it gets to every rank exactly once (a second Ctrl-C is a second signal to each rank, as if sent directly).
// If the launcher itself is killed, the ranks get SIGTERM (PR_SET_PDEATHSIG).
//
// Fail fast: when a rank fails (non-zero exit or a signal) while others still run, the others get
// SIGTERM at once and SIGKILL `kill_grace_seconds` later, so a rank blocked in a collective with the
// failed one cannot hang the job. When the first failure is a rank that ended because another failed
// (kPeerFailedExitCode), or follows a signal the launcher passed on, the ranks are already ending by
// themselves: SIGTERM waits `kill_grace_seconds`, SIGKILL as long again. The launcher's exit status is the FAILING rank's: the first rank (in
// time) that failed on its own — not one that ended because of the failure (kPeerFailedExitCode) or
// that the launcher killed — falling back to the first failure of any kind.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace sg::dist {

struct LaunchOptions {
  int num_ranks = 1;
  std::vector<std::string> argv;  // the program and its arguments, run once per rank
  std::string master_addr = "127.0.0.1";
  int master_port = 0;            // 0: a free port of this machine
  double kill_grace_seconds = 5.0;
  std::vector<std::pair<std::string, std::string>> extra_env;  // added to every rank's environment
};

struct RankExit {
  int rank = 0;
  int status = 0;              // waitpid status
  double seconds = 0.0;        // since the launch
  bool killed_by_launcher = false;  // the launcher had sent it SIGTERM/SIGKILL after another rank failed
  bool failed() const;         // non-zero exit or death by a signal
  int exit_code() const;       // the exit status, or 128 + signal
};

struct LaunchResult {
  int exit_code = 0;
  int failed_rank = -1;          // the rank whose status exit_code is; -1 when every rank succeeded
  std::vector<RankExit> exits;   // in the order the ranks ended
  int stop_signal = 0;           // the first signal the launcher received and passed on; 0: none
  // "rank 1 failed with exit status 3; the launcher ended rank(s) 0, 2", or, when the ranks ended with the
  // status of the signal passed on to them, "stopped on SIGTERM, passed on to every rank (exit status 143)"
  std::string summary;
};

// Starts the ranks and waits for all of them. Throws sg::Error when a rank cannot be started.
LaunchResult launch_local(const LaunchOptions& options);

// The exit status of a finished launch from its exits in time order (see the file comment). Pure.
int choose_exit_code(const std::vector<RankExit>& exits_in_order, int* failed_rank = nullptr);

// A TCP port that was free a moment ago (bind to port 0, read it back, close).
int find_free_port();

// A fresh token for STEPGRAPH_RUN_ID.
std::string new_run_id();

}  // namespace sg::dist
