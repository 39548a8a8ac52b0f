#pragma once
// Runs a body as N forked "ranks" of this test process and collects how each ended, for the
// rendezvous and launcher tests. Each rank's stderr goes to a file the test can read.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <exception>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace sg::test {

struct RankOutcome {
  int status = -1;        // waitpid status
  double seconds = 0.0;   // when it ended, since the start
  std::string stderr_text;
  bool exited() const { return status >= 0 && WIFEXITED(status); }
  int code() const { return exited() ? WEXITSTATUS(status) : -1; }
};

// body(rank) returns the rank's exit code; an exception prints its message and exits 99. Ranks still
// running after `limit` are killed (status then shows SIGKILL).
inline std::vector<RankOutcome> run_ranks(int n, const std::function<int(int)>& body,
                                          std::chrono::milliseconds limit = std::chrono::seconds(60)) {
  std::fflush(stdout);
  std::fflush(stderr);
  const auto start = std::chrono::steady_clock::now();
  std::vector<pid_t> pids;
  std::vector<std::string> logs;
  for (int r = 0; r < n; ++r) {
    logs.push_back(std::string(::testing::TempDir()) + "rank_" + std::to_string(::getpid()) + "_" + std::to_string(r) +
                   ".log");
    const pid_t pid = ::fork();
    if (pid == 0) {
      if (std::freopen(logs.back().c_str(), "w", stderr) == nullptr) _exit(98);
      int code = 0;
      try {
        code = body(r);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "rank %d threw: %s\n", r, e.what());
        code = 99;
      }
      std::fflush(stderr);
      _exit(code);
    }
    pids.push_back(pid);
  }
  std::vector<RankOutcome> out(static_cast<size_t>(n));
  std::vector<bool> done(static_cast<size_t>(n), false);
  int remaining = n;
  while (remaining > 0) {
    const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    for (int r = 0; r < n; ++r) {
      if (done[static_cast<size_t>(r)]) continue;
      int status = 0;
      if (::waitpid(pids[static_cast<size_t>(r)], &status, WNOHANG) == pids[static_cast<size_t>(r)]) {
        done[static_cast<size_t>(r)] = true;
        out[static_cast<size_t>(r)].status = status;
        out[static_cast<size_t>(r)].seconds = t;
        --remaining;
      } else if (std::chrono::steady_clock::now() - start > limit) {
        ::kill(pids[static_cast<size_t>(r)], SIGKILL);
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  for (int r = 0; r < n; ++r) {
    std::ifstream in(logs[static_cast<size_t>(r)]);
    std::stringstream ss;
    ss << in.rdbuf();
    out[static_cast<size_t>(r)].stderr_text = ss.str();
    std::remove(logs[static_cast<size_t>(r)].c_str());
  }
  return out;
}

}  // namespace sg::test
