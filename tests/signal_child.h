#pragma once
// Signal tests run the test binary itself as a child (one gtest "helper" test selected by a filter and
// an environment variable), wait until it prints READY, send it signals and time its exit.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace sg::test {

struct SignalledChild {
  std::string helper_test;  // gtest name of the helper, e.g. "StopSignalHelper.Run"
  std::string env_name;     // the variable that turns the helper on
  std::string mode;         // its value: what the helper does
  int signals = 1;          // how many signals, spaced by `gap`
  int signal_number = SIGINT;
  std::chrono::milliseconds gap{0};
  std::chrono::milliseconds deadline{2000};  // from the first signal to the exit
  std::chrono::seconds ready_timeout{30};    // CUDA start-up and captures can be slow on a cold machine
};

struct ChildResult {
  bool exited = false;   // by itself, before the deadline
  int status = 0;        // waitpid status
  double seconds = 0.0;  // from the first signal to the exit
  std::string output;
};

inline ChildResult run_signalled_child(const SignalledChild& c) {
  ChildResult result;
  int out_pipe[2];
  if (pipe(out_pipe) != 0) {
    ADD_FAILURE() << "pipe failed";
    return result;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&actions, out_pipe[0]);
  const std::string env_entry = c.env_name + "=" + c.mode;
  std::vector<char*> env;
  for (char** e = environ; *e != nullptr; ++e) env.push_back(*e);
  env.push_back(const_cast<char*>(env_entry.c_str()));
  env.push_back(nullptr);
  std::string exe = "/proc/self/exe";
  std::string filter = "--gtest_filter=" + c.helper_test;
  char* argv[] = {exe.data(), filter.data(), nullptr};
  // The child starts with the stop signals at their defaults, whatever this process inherited (nohup's ignored
  // SIGHUP, a background job's ignored SIGINT), which stepgraph would keep (core/inherited_signals.h).
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  sigset_t defaults;
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGINT);
  sigaddset(&defaults, SIGHUP);
  posix_spawnattr_setsigdefault(&attributes, &defaults);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETSIGDEF);
  pid_t pid = -1;
  const int spawn_err = posix_spawn(&pid, exe.c_str(), &actions, &attributes, argv, env.data());
  posix_spawnattr_destroy(&attributes);
  posix_spawn_file_actions_destroy(&actions);
  close(out_pipe[1]);
  if (spawn_err != 0) {
    ADD_FAILURE() << "posix_spawn failed: " << spawn_err;
    close(out_pipe[0]);
    return result;
  }
  char buffer[4096];
  const auto ready_deadline = std::chrono::steady_clock::now() + c.ready_timeout;
  while (result.output.find("READY") == std::string::npos && std::chrono::steady_clock::now() < ready_deadline) {
    pollfd p{out_pipe[0], POLLIN, 0};
    if (poll(&p, 1, 100) > 0) {
      const ssize_t n = read(out_pipe[0], buffer, sizeof(buffer));
      if (n <= 0) break;
      result.output.append(buffer, static_cast<size_t>(n));
    }
  }
  if (result.output.find("READY") == std::string::npos) {
    kill(pid, SIGKILL);
    waitpid(pid, &result.status, 0);
    close(out_pipe[0]);
    ADD_FAILURE() << "the helper never became ready; output:\n" << result.output;
    return result;
  }
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < c.signals; ++i) {
    if (i > 0) std::this_thread::sleep_for(c.gap);
    kill(pid, c.signal_number);
  }
  fcntl(out_pipe[0], F_SETFL, O_NONBLOCK);
  while (std::chrono::steady_clock::now() - t0 < c.deadline) {
    const pid_t w = waitpid(pid, &result.status, WNOHANG);
    ssize_t n;
    while ((n = read(out_pipe[0], buffer, sizeof(buffer))) > 0) result.output.append(buffer, static_cast<size_t>(n));
    if (w == pid) {
      result.exited = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  if (!result.exited) {
    kill(pid, SIGKILL);
    waitpid(pid, &result.status, 0);
  }
  close(out_pipe[0]);
  return result;
}

}  // namespace sg::test
