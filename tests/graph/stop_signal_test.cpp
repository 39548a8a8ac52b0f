// Stop handling without a GPU: SIGINT sets the flag a loop polls (clean exit 130 within 2 s), a loop
// that never polls is ended by the watchdog within 2 s, a second signal exits at once, the same signal
// twice within 0.2 s (one request delivered twice) still stops cleanly. The child is
// this test executable itself, filtered to StopSignalHelper.Run with SG_STOP_SIGNAL_HELPER set.
// (tests/graph/graph_signal_gpu_test.cu does the same while replaying CUDA graphs.)
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "graph/registry.h"
#include "signal_child.h"

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

using test::ChildResult;

ChildResult run_child(const std::string& mode, int signals, int signal_number, std::chrono::milliseconds gap) {
  test::SignalledChild c;
  c.helper_test = "StopSignalHelper.Run";
  c.env_name = kHelperEnv;
  c.mode = mode;
  c.signals = signals;
  c.signal_number = signal_number;
  c.gap = gap;
  return test::run_signalled_child(c);
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

// A closed terminal or ssh session (SIGHUP) stops a run like SIGTERM, instead of killing it unsaved.
TEST(StopSignal, SighupToo) {
  const ChildResult r = run_child("poll", 1, SIGHUP, std::chrono::milliseconds(0));
  ASSERT_TRUE(r.exited) << r.output;
  ASSERT_TRUE(WIFEXITED(r.status)) << "killed by signal " << (WIFSIGNALED(r.status) ? WTERMSIG(r.status) : 0)
                                   << ":\n" << r.output;
  EXPECT_EQ(WEXITSTATUS(r.status), 129) << r.output;
  EXPECT_NE(r.output.find("cleaned up; exiting with 129"), std::string::npos) << r.output;
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
  const ChildResult r = run_child("hang", 2, SIGINT, std::chrono::milliseconds(400));
  ASSERT_TRUE(r.exited) << r.output;
  ASSERT_TRUE(WIFEXITED(r.status)) << r.output;
  EXPECT_EQ(WEXITSTATUS(r.status), 130) << r.output;
  EXPECT_LT(r.seconds, 1.0) << "the second signal must not wait for the grace period";
}

// `timeout -s INT 1h stepgraph train ...` delivers its one SIGINT twice within microseconds (to the command,
// then to its process group): that must still be a clean stop (save, report), not "exit now".
// (A loop that never polls keeps the child alive for the second signal: it must then get its grace period, as
// after one signal, instead of the immediate exit of SecondSignalExitsAtOnce.)
TEST(StopSignal, TheSameSignalTwiceAtOnceIsOneStopRequest) {
  const ChildResult r = run_child("hang", 2, SIGINT, std::chrono::milliseconds(5));
  ASSERT_TRUE(r.exited) << r.output;
  ASSERT_TRUE(WIFEXITED(r.status)) << r.output;
  EXPECT_EQ(WEXITSTATUS(r.status), 130) << r.output;
  EXPECT_GE(r.seconds, 1.4) << "the repeat was taken for a second request and exited at once:\n" << r.output;
}

// A signal between a failed call and its caller's read of errno leaves errno as it was: here the handler's own
// write fails (stderr closed, EBADF), and the interrupted code must still read its ENOSPC.
TEST(StopSignal, TheHandlerLeavesErrnoAsItWas) {
  install_stop_handlers(1.5);
  const int saved_stderr = ::dup(STDERR_FILENO);
  ASSERT_GE(saved_stderr, 0);
  ::close(STDERR_FILENO);
  errno = ENOSPC;
  ::raise(SIGINT);
  const int after = errno;
  ::dup2(saved_stderr, STDERR_FILENO);
  ::close(saved_stderr);
  const bool stopped = stop_requested();
  clear_stop_request();  // before the watchdog's grace period ends this process
  uninstall_stop_handlers();
  EXPECT_TRUE(stopped);
  EXPECT_EQ(after, ENOSPC) << std::strerror(after);
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
