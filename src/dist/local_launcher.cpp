#include "dist/local_launcher.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <random>
#include <thread>

#include "core/error.h"
#include "core/inherited_signals.h"
#include "core/signal_name.h"
#include "core/strings.h"
#include "dist/socket.h"
#include "dist/store_protocol.h"

extern char** environ;

namespace sg::dist {

bool RankExit::failed() const { return !(WIFEXITED(status) && WEXITSTATUS(status) == 0); }

int RankExit::exit_code() const {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

namespace {
// A rank the launcher signalled that still exited with a status of its own (not the peer-failure status, not the
// status of a stop by SIGTERM, SIGINT or SIGHUP, not killed): its own failure, reported while it tore down (a device
// release or an NCCL abort can outlast the launcher's grace).
bool failed_on_its_own_after_the_launchers_signal(const RankExit& e) {
  if (!e.killed_by_launcher || !WIFEXITED(e.status)) return false;
  const int code = WEXITSTATUS(e.status);
  return code != 0 && code != kPeerFailedExitCode && code != 128 + SIGTERM && code != 128 + SIGINT &&
         code != 128 + SIGHUP && code != 128 + SIGKILL;
}
}  // namespace

int choose_exit_code(const std::vector<RankExit>& exits_in_order, int* failed_rank) {
  const RankExit* chosen = nullptr;
  for (const RankExit& e : exits_in_order) {
    if (e.failed() && !e.killed_by_launcher && e.exit_code() != kPeerFailedExitCode) {
      chosen = &e;
      break;
    }
  }
  for (const RankExit& e : exits_in_order) {
    if (chosen != nullptr) break;
    if (failed_on_its_own_after_the_launchers_signal(e)) chosen = &e;
  }
  if (chosen == nullptr) {
    for (const RankExit& e : exits_in_order) {
      if (e.failed()) {
        chosen = &e;
        break;
      }
    }
  }
  if (failed_rank) *failed_rank = chosen ? chosen->rank : -1;
  return chosen ? chosen->exit_code() : 0;
}

int find_free_port() {
  Socket s = listen_on(0, "a free port");
  return bound_port(s);
}

std::string new_run_id() {
  std::random_device device;
  std::mt19937_64 rng((static_cast<uint64_t>(device()) << 32) ^ static_cast<uint64_t>(::getpid()) ^
                      static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count()));
  return strprintf("%016llx", static_cast<unsigned long long>(rng()));
}

namespace {

// Signals received by the launcher, counted in the handler (async-signal-safe) and forwarded by the loop.
constexpr int kForwarded[] = {SIGINT, SIGTERM, SIGHUP};
std::atomic<int> g_received[3];

extern "C" void launcher_signal_handler(int signal_number) {
  for (int i = 0; i < 3; ++i) {
    if (kForwarded[i] == signal_number) g_received[i].fetch_add(1);
  }
}

class ForwardSignals {
 public:
  ForwardSignals() {
    struct sigaction action {};
    action.sa_handler = launcher_signal_handler;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    for (int i = 0; i < 3; ++i) {
      g_received[i].store(0);
      // SIGHUP inherited as ignored (nohup) stays ignored, here and in the ranks (hangup_ignored_at_start).
      if (kForwarded[i] == SIGHUP && hangup_ignored_at_start()) {
        sigaction(SIGHUP, nullptr, &previous_[i]);
        continue;
      }
      sigaction(kForwarded[i], &action, &previous_[i]);
    }
  }
  ~ForwardSignals() {
    for (int i = 0; i < 3; ++i) sigaction(kForwarded[i], &previous_[i], nullptr);
  }
  // Signals received since the last call, as (signal, count).
  std::vector<std::pair<int, int>> take() {
    std::vector<std::pair<int, int>> out;
    for (int i = 0; i < 3; ++i) {
      const int now = g_received[i].load();
      if (now > seen_[i]) out.emplace_back(kForwarded[i], now - seen_[i]);
      seen_[i] = now;
    }
    return out;
  }

 private:
  struct sigaction previous_[3] {};
  int seen_[3] = {0, 0, 0};
};

struct Child {
  int rank = 0;
  pid_t pid = -1;
  bool running = false;
  bool killed_by_launcher = false;
};

}  // namespace

LaunchResult launch_local(const LaunchOptions& options) {
  SG_CHECK(options.num_ranks >= 1, strprintf("launch: -n %d must be at least 1", options.num_ranks));
  SG_CHECK(!options.argv.empty(), "launch: nothing to run (give the command after --)");
  const int port = options.master_port > 0 ? options.master_port : find_free_port();
  const std::string run_id = new_run_id();

  // Everything the children need is built before fork: the child only calls async-signal-safe functions.
  std::vector<std::string> base_env;
  // Ours to set, or (TORCHELASTIC_USE_AGENT_STORE, from an enclosing torchrun) to drop: no agent store listens on
  // this launch's MASTER_PORT, so rank 0 serves stepgraph's store there.
  const auto ours = [](const std::string& entry) {
    for (const char* name : {"RANK=", "LOCAL_RANK=", "WORLD_SIZE=", "LOCAL_WORLD_SIZE=", "MASTER_ADDR=", "MASTER_PORT=",
                             "STEPGRAPH_RUN_ID=", "GROUP_RANK=", "TORCHELASTIC_USE_AGENT_STORE="}) {
      if (entry.rfind(name, 0) == 0) return true;
    }
    return false;
  };
  for (char** e = environ; *e != nullptr; ++e) {
    if (!ours(*e)) base_env.emplace_back(*e);
  }
  for (const auto& [name, value] : options.extra_env) base_env.push_back(name + "=" + value);
  std::vector<std::vector<std::string>> envs;
  for (int r = 0; r < options.num_ranks; ++r) {
    std::vector<std::string> env = base_env;
    env.push_back("RANK=" + std::to_string(r));
    env.push_back("LOCAL_RANK=" + std::to_string(r));
    env.push_back("GROUP_RANK=0");
    env.push_back("WORLD_SIZE=" + std::to_string(options.num_ranks));
    env.push_back("LOCAL_WORLD_SIZE=" + std::to_string(options.num_ranks));
    env.push_back("MASTER_ADDR=" + options.master_addr);
    env.push_back("MASTER_PORT=" + std::to_string(port));
    env.push_back("STEPGRAPH_RUN_ID=" + run_id);
    envs.push_back(std::move(env));
  }
  std::vector<char*> argv;
  for (const std::string& a : options.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);

  ForwardSignals signals;
  const auto start = std::chrono::steady_clock::now();
  const auto since_start = [&start] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  std::vector<Child> children(static_cast<size_t>(options.num_ranks));
  const pid_t launcher = ::getpid();
  std::string start_error;
  for (int r = 0; r < options.num_ranks; ++r) {
    std::vector<char*> envp;
    for (const std::string& e : envs[static_cast<size_t>(r)]) envp.push_back(const_cast<char*>(e.c_str()));
    envp.push_back(nullptr);
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::setpgid(0, 0);
      ::prctl(PR_SET_PDEATHSIG, SIGTERM);
      if (::getppid() != launcher) _exit(1);  // the launcher died before prctl
      struct sigaction dfl {};
      dfl.sa_handler = SIG_DFL;
      for (const int s : kForwarded) {
        if (s == SIGHUP && hangup_ignored_at_start()) continue;  // nohup's SIG_IGN reaches the ranks
        ::sigaction(s, &dfl, nullptr);
      }
      ::execve(argv[0], argv.data(), envp.data());
      const char message[] = "stepgraph launch: cannot execute the rank's command\n";
      ssize_t ignored = ::write(STDERR_FILENO, message, sizeof(message) - 1);
      (void)ignored;
      _exit(127);
    }
    if (pid < 0) {
      start_error = strprintf("launch: fork for rank %d failed: %s", r, std::strerror(errno));
      break;
    }
    ::setpgid(pid, pid);
    children[static_cast<size_t>(r)] = Child{r, pid, true, false};
  }

  LaunchResult result;
  // After the first failure: SIGTERM to the ranks still running at term_at, SIGKILL at kill_at (< 0: done).
  // A rank that failed on its own gets the others terminated at once (they may be blocked in a collective
  // with it); a rank that ended because ANOTHER rank failed (kPeerFailedExitCode) means that rank is
  // ending by itself, so the others get the grace period first and the failing rank keeps its own status.
  bool failing = !start_error.empty();
  bool forwarded = false;  // the launcher passed a signal on: the ranks are stopping on request
  double term_at = failing ? 0.0 : -1.0;
  double kill_at = failing ? options.kill_grace_seconds : -1.0;
  const auto signal_running = [&](int signal_number) {
    for (Child& c : children) {
      if (c.running) {
        ::kill(-c.pid, signal_number);
        c.killed_by_launcher = true;
      }
    }
  };
  for (;;) {
    for (const auto& [signal_number, count] : signals.take()) {
      forwarded = true;
      if (result.stop_signal == 0) result.stop_signal = signal_number;
      for (int i = 0; i < count; ++i) {
        for (const Child& c : children) {
          if (c.running) ::kill(-c.pid, signal_number);
        }
      }
    }
    bool any_running = false;
    for (Child& c : children) {
      if (!c.running) continue;
      int status = 0;
      const pid_t w = ::waitpid(c.pid, &status, WNOHANG);
      if (w == c.pid) {
        c.running = false;
        RankExit e;
        e.rank = c.rank;
        e.status = status;
        e.seconds = since_start();
        e.killed_by_launcher = c.killed_by_launcher;
        result.exits.push_back(e);
        if (e.failed() && !failing) {
          failing = true;
          // Ending because of another rank, or of a signal the launcher passed on: the rest are ending
          // by themselves; give them the grace period before helping.
          const bool expected = e.exit_code() == kPeerFailedExitCode || forwarded;
          term_at = since_start() + (expected ? options.kill_grace_seconds : 0.0);
          kill_at = term_at + options.kill_grace_seconds;
        }
      } else {
        any_running = true;
      }
    }
    if (!any_running) break;
    if (term_at >= 0.0 && since_start() >= term_at) {
      signal_running(SIGTERM);
      term_at = -1.0;
    }
    if (kill_at >= 0.0 && since_start() >= kill_at) {
      signal_running(SIGKILL);
      kill_at = -1.0;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  if (!start_error.empty()) throw Error(start_error);

  result.exit_code = choose_exit_code(result.exits, &result.failed_rank);
  if (result.failed_rank >= 0) {
    std::vector<std::string> ended;
    for (const RankExit& e : result.exits) {
      if (e.rank != result.failed_rank && e.killed_by_launcher) ended.push_back(std::to_string(e.rank));
    }
    if (result.stop_signal != 0 && result.exit_code == 128 + result.stop_signal) {
      // The user asked for the stop (Ctrl-C, a scheduler's SIGTERM): the ranks did as told, none failed.
      result.summary = strprintf("stopped on %s, passed on to every rank (exit status %d)",
                                 signal_name(result.stop_signal).c_str(), result.exit_code);
    } else {
      result.summary = strprintf("rank %d failed with exit status %d", result.failed_rank, result.exit_code);
    }
    if (!ended.empty()) result.summary += "; the launcher ended rank(s) " + join(ended, ", ");
  } else {
    result.summary = strprintf("all %d ranks finished", options.num_ranks);
  }
  return result;
}

}  // namespace sg::dist
