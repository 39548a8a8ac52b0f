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
#include "signal_child.h"
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

using test::ChildResult;

// Runs the helper in `mode`, waits for READY (up to 120 s: CUDA start-up and the capture), sends
// `signals` SIGINTs spaced by `gap`, then waits up to `deadline` for the exit.
ChildResult run_child(const std::string& mode, int signals, std::chrono::milliseconds gap,
                      std::chrono::milliseconds deadline) {
  test::SignalledChild c;
  c.helper_test = "GraphSignalHelper.Run";
  c.env_name = kHelperEnv;
  c.mode = mode;
  c.signals = signals;
  c.gap = gap;
  c.deadline = deadline;
  c.ready_timeout = std::chrono::seconds(120);
  return test::run_signalled_child(c);
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
  const ChildResult r = run_child("hang", 2, std::chrono::milliseconds(400), std::chrono::seconds(2));
  ASSERT_TRUE(r.exited) << r.output;
  ASSERT_TRUE(WIFEXITED(r.status)) << r.output;
  EXPECT_EQ(WEXITSTATUS(r.status), 128 + SIGINT) << r.output;
  EXPECT_LT(r.seconds, 1.0) << "the second signal must not wait for the grace period";
}

}  // namespace
}  // namespace sg::graph
