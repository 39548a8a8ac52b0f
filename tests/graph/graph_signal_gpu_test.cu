// SIGINT during graph replay: the process stops cleanly within 2 s, never hangs.
//
// The parent test starts this same executable as a child, filtered to GraphSignalHelper.Run with
// SG_GRAPH_SIGNAL_HELPER set (the helper skips itself otherwise). The child replays the toy step's
// full-iteration graph in a loop and prints READY; the parent sends the signal(s) and measures
// how long the child takes to exit and with which status.
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "cuda/device.h"
#include "cuda/stream.h"
#include "graph/full_iteration_runner.h"
#include "graph/registry.h"
#include "graph/toy_step.cuh"

extern char** environ;

namespace sg::graph {
namespace {

constexpr const char* kHelperEnv = "SG_GRAPH_SIGNAL_HELPER";

// The child. Modes: "poll" — a well-behaved loop that polls stop_requested() between steps;
// "hang" — a loop that never polls (a stuck step): only the watchdog or a second signal ends it.
TEST(GraphSignalHelper, Run) {
  const char* mode_env = std::getenv(kHelperEnv);
  if (mode_env == nullptr) GTEST_SKIP() << "helper for GraphSignal tests; runs only as their child";
  const std::string mode = mode_env;
  install_stop_handlers(1.5);
  toy::ToyStep toy(toy::ToyConfig{});
  toy.reset();
  cuda::Stream stream;
  cuda::Event done;
  EagerRegionRunner eager;
  long steps = 0;
  {
    GraphRegistry registry;
    FullIterationRunner runner(registry, 1);
    while (mode == "hang" || !stop_requested()) {
      runner.run_step(stream, [&](cudaStream_t s) { toy.enqueue(s, eager); });
      done.record(stream);
      done.synchronize();  // like a trainer reading the loss after each step
      if (++steps == 3) {
        std::printf("READY\n");
        std::fflush(stdout);
      }
    }
    std::printf("stopping after %ld steps (%llu replays)\n", steps,
                static_cast<unsigned long long>(registry.stats().replays));
  }  // the registry destroys every graph here
  std::printf("graphs destroyed; exiting with %d\n", exit_code_for_stop());
  std::fflush(stdout);
  std::exit(exit_code_for_stop());
}

struct ChildResult {
  bool exited = false;     // by itself, before the deadline
  int status = 0;          // waitpid status
  double seconds = 0.0;    // from the first signal to exit
  std::string output;
};

// Runs the helper in `mode`, waits for READY, sends `signals` (spaced by `gap`), then waits up to
// `deadline` for the exit.
ChildResult run_child(const std::string& mode, int signals, std::chrono::milliseconds gap,
                      std::chrono::milliseconds deadline) {
  ChildResult result;
  int out_pipe[2];
  EXPECT_EQ(pipe(out_pipe), 0);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out_pipe[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&actions, out_pipe[0]);
  const std::string env_entry = std::string(kHelperEnv) + "=" + mode;
  std::vector<char*> env;
  for (char** e = environ; *e != nullptr; ++e) env.push_back(*e);
  env.push_back(const_cast<char*>(env_entry.c_str()));
  env.push_back(nullptr);
  std::string exe = "/proc/self/exe";
  std::string filter = "--gtest_filter=GraphSignalHelper.Run";
  char* argv[] = {exe.data(), filter.data(), nullptr};
  pid_t pid = -1;
  const int spawn_err = posix_spawn(&pid, exe.c_str(), &actions, nullptr, argv, env.data());
  posix_spawn_file_actions_destroy(&actions);
  close(out_pipe[1]);
  EXPECT_EQ(spawn_err, 0);
  if (spawn_err != 0) return result;

  // Wait for READY (CUDA initialisation and the capture take a while on a cold machine).
  const auto ready_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120);
  char buffer[4096];
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
  for (int i = 0; i < signals; ++i) {
    if (i > 0) std::this_thread::sleep_for(gap);
    kill(pid, SIGINT);
  }
  fcntl(out_pipe[0], F_SETFL, O_NONBLOCK);
  while (std::chrono::steady_clock::now() - t0 < deadline) {
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

class GraphSignal : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda::device_count() == 0) GTEST_SKIP() << "no GPU";
  }
};

TEST_F(GraphSignal, SigintDuringReplayStopsCleanlyWithin2s) {
  const ChildResult r = run_child("poll", 1, std::chrono::milliseconds(0), std::chrono::seconds(2));
  ASSERT_TRUE(r.exited) << "still running 2 s after SIGINT; output:\n" << r.output;
  ASSERT_TRUE(WIFEXITED(r.status)) << "killed by a signal instead of exiting; output:\n" << r.output;
  EXPECT_EQ(WEXITSTATUS(r.status), 128 + SIGINT) << r.output;
  EXPECT_NE(r.output.find("graphs destroyed"), std::string::npos) << "cleanup did not run:\n" << r.output;
  std::printf("child exited %.3f s after SIGINT\n", r.seconds);
}

TEST_F(GraphSignal, StuckLoopIsEndedByTheWatchdogWithin2s) {
  const ChildResult r = run_child("hang", 1, std::chrono::milliseconds(0), std::chrono::seconds(2));
  ASSERT_TRUE(r.exited) << "a loop that never polls hung the process; output:\n" << r.output;
  ASSERT_TRUE(WIFEXITED(r.status)) << r.output;
  EXPECT_EQ(WEXITSTATUS(r.status), 128 + SIGINT) << r.output;
  EXPECT_GE(r.seconds, 1.0) << "the watchdog must give the loop its grace period first";
  EXPECT_EQ(r.output.find("graphs destroyed"), std::string::npos);  // the stuck loop never got there
}

TEST_F(GraphSignal, SecondSignalExitsAtOnce) {
  const ChildResult r = run_child("hang", 2, std::chrono::milliseconds(100), std::chrono::seconds(2));
  ASSERT_TRUE(r.exited) << r.output;
  ASSERT_TRUE(WIFEXITED(r.status)) << r.output;
  EXPECT_EQ(WEXITSTATUS(r.status), 128 + SIGINT) << r.output;
  EXPECT_LT(r.seconds, 1.0) << "the second signal must not wait for the grace period";
}

}  // namespace
}  // namespace sg::graph
