// Stop handling without a GPU: SIGINT sets the flag a loop polls (clean exit 130 within 2 s), a loop
// that never polls is ended by the watchdog within 2 s, a second signal exits at once. The child is
// this test executable itself, filtered to StopSignalHelper.Run with SG_STOP_SIGNAL_HELPER set.
// (tests/graph/graph_signal_gpu_test.cu does the same while replaying CUDA graphs.)
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
#include <vector>

#include "graph/registry.h"

extern char** environ;

namespace sg::graph {
namespace {

constexpr const char* kHelperEnv = "SG_STOP_SIGNAL_HELPER";

// "poll": a well-behaved loop; "hang": a loop that never polls the flag.
TEST(StopSignalHelper, Run) {
  const char* mode_env = std::getenv(kHelperEnv);
  if (mode_env == nullptr) GTEST_SKIP() << "helper for StopSignal tests; runs only as their child";
  const std::string mode = mode_env;
  install_stop_handlers(1.5);
  {
    GraphRegistry registry;  // no graphs without a GPU, but its cleanup path runs
    std::printf("READY\n");
    std::fflush(stdout);
    long steps = 0;
    while (mode == "hang" || !stop_requested()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(2));  // "a step"
      ++steps;
    }
    std::printf("stopping after %ld steps\n", steps);
  }
  std::printf("cleaned up; exiting with %d\n", exit_code_for_stop());
  std::fflush(stdout);
  std::exit(exit_code_for_stop());
}

struct ChildResult {
  bool exited = false;
  int status = 0;
  double seconds = 0.0;
  std::string output;
};

ChildResult run_child(const std::string& mode, int signals, int signal_number, std::chrono::milliseconds gap) {
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
  const std::string env_entry = std::string(kHelperEnv) + "=" + mode;
  std::vector<char*> env;
  for (char** e = environ; *e != nullptr; ++e) env.push_back(*e);
  env.push_back(const_cast<char*>(env_entry.c_str()));
  env.push_back(nullptr);
  std::string exe = "/proc/self/exe";
  std::string filter = "--gtest_filter=StopSignalHelper.Run";
  char* argv[] = {exe.data(), filter.data(), nullptr};
  pid_t pid = -1;
  const int spawn_err = posix_spawn(&pid, exe.c_str(), &actions, nullptr, argv, env.data());
  posix_spawn_file_actions_destroy(&actions);
  close(out_pipe[1]);
  if (spawn_err != 0) {
    ADD_FAILURE() << "posix_spawn failed: " << spawn_err;
    close(out_pipe[0]);
    return result;
  }
  char buffer[4096];
  const auto ready_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
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
    kill(pid, signal_number);
  }
  fcntl(out_pipe[0], F_SETFL, O_NONBLOCK);
  while (std::chrono::steady_clock::now() - t0 < std::chrono::seconds(2)) {
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

TEST(StopSignal, SigintStopsThePollingLoopCleanly) {
  const ChildResult r = run_child("poll", 1, SIGINT, std::chrono::milliseconds(0));
  ASSERT_TRUE(r.exited) << "still running 2 s after SIGINT:\n" << r.output;
  ASSERT_TRUE(WIFEXITED(r.status)) << r.output;
  EXPECT_EQ(WEXITSTATUS(r.status), 130) << r.output;
  EXPECT_NE(r.output.find("cleaned up; exiting with 130"), std::string::npos) << r.output;
  EXPECT_LT(r.seconds, 1.0) << "a polling loop should stop well before the watchdog's grace period";
}

TEST(StopSignal, SigtermToo) {
  const ChildResult r = run_child("poll", 1, SIGTERM, std::chrono::milliseconds(0));
  ASSERT_TRUE(r.exited) << r.output;
  ASSERT_TRUE(WIFEXITED(r.status)) << r.output;
  EXPECT_EQ(WEXITSTATUS(r.status), 143) << r.output;
}

TEST(StopSignal, WatchdogEndsALoopThatNeverPolls) {
  const ChildResult r = run_child("hang", 1, SIGINT, std::chrono::milliseconds(0));
  ASSERT_TRUE(r.exited) << "a stuck loop hung the process:\n" << r.output;
  ASSERT_TRUE(WIFEXITED(r.status)) << r.output;
  EXPECT_EQ(WEXITSTATUS(r.status), 130) << r.output;
  EXPECT_GE(r.seconds, 1.4) << "the watchdog must give the loop its grace period (1.5 s) first";
  EXPECT_EQ(r.output.find("cleaned up"), std::string::npos) << r.output;
}

TEST(StopSignal, SecondSignalExitsAtOnce) {
  const ChildResult r = run_child("hang", 2, SIGINT, std::chrono::milliseconds(100));
  ASSERT_TRUE(r.exited) << r.output;
  ASSERT_TRUE(WIFEXITED(r.status)) << r.output;
  EXPECT_EQ(WEXITSTATUS(r.status), 130) << r.output;
  EXPECT_LT(r.seconds, 1.0) << "the second signal must not wait for the grace period";
}

TEST(StopSignal, FlagApiWithoutSignals) {
  clear_stop_request();
  EXPECT_FALSE(stop_requested());
  EXPECT_EQ(exit_code_for_stop(), 0);
  request_stop(SIGTERM);
  EXPECT_TRUE(stop_requested());
  EXPECT_EQ(stop_signal(), SIGTERM);
  EXPECT_EQ(exit_code_for_stop(), 143);
  clear_stop_request();
  EXPECT_FALSE(stop_requested());
}

}  // namespace
}  // namespace sg::graph
