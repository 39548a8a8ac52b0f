// What `stepgraph train` does when its output goes nowhere or its event files cannot be written, through the
// real binary on the CPU backend:
// - `stepgraph train ... 2>&1 | tee log` and Ctrl-C: the terminal's SIGINT ends tee as well, and the run's next
//   line to the pipe (the stop message, a progress line) raised SIGPIPE, which killed it (status 141) with no
//   checkpoint and no report. It now stops as any stop does: status 130, checkpoint saved, report written.
// - A TensorBoard event file the disk refuses stops the run with an error naming it, as metrics.jsonl does
//   (the events were dropped silently).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "checkpoint/safetensors.h"
#include "train_cli_fixture.h"

namespace {

using namespace sg::test::train_cli;
namespace fs = std::filesystem;

using TrainerOutputTest = TrainerCliTest;

// The status as the shell shows it: the exit code, or 128 + the signal that killed the process.
int shell_status(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

// log_interval 1: a progress line every step after tee left; 100000: none, the stop message is the first write.
class TrainerOutputPipeTest : public TrainerCliTest, public ::testing::WithParamInterface<int> {};

TEST_P(TrainerOutputPipeTest, CtrlCOnARunPipedIntoTeeStillSavesAndReports) {
  const std::string run = path("run"), ckpt = path("ckpt");
  const PipedChild child =
      spawn_into_pipe(tiny_model({"train.train_iters=100000", "logger.log_interval=" + std::to_string(GetParam()),
                                  "checkpoint.save=" + ckpt, "--run-dir", run, "--cpu"}));
  ASSERT_GT(child.pid, 0);
  KillOnExit guard{child.pid};
  // tee reads up to the line that starts the steps, then Ctrl-C ends it: the pipe has no reader left.
  std::string line, read_lines;
  char c = 0;
  while (line.rfind("training steps", 0) != 0 && ::read(child.read_end, &c, 1) == 1) {
    if (c != '\n') {
      line.push_back(c);
    } else {
      read_lines += line + "\n";
      line.clear();
    }
  }
  ASSERT_EQ(line.rfind("training steps", 0), 0u) << "stepgraph never started the steps:\n" << read_lines << line;
  ::close(child.read_end);
  // Steps go on, each with its progress line into the readerless pipe (a SIGPIPE each, before the fix).
  const MetricsWait waited = wait_for_metrics_lines(guard, run + "/metrics.jsonl", 4, std::chrono::seconds(120));
  ASSERT_FALSE(waited.ended) << "stepgraph ended before the signal, status " << shell_status(waited.status)
                             << " (141: killed by SIGPIPE writing to the pipe tee left)";
  ASSERT_GE(count_lines(run + "/metrics.jsonl"), 4u);
  ASSERT_EQ(::kill(child.pid, SIGINT), 0);  // the stop message goes to the pipe too
  int status = 0;
  ASSERT_EQ(::waitpid(child.pid, &status, 0), child.pid);
  guard.release();
  EXPECT_EQ(shell_status(status), 130) << "141: killed by SIGPIPE";
  const std::string latest = trim(read_file(ckpt + "/latest_checkpointed_iteration.txt"));
  ASSERT_FALSE(latest.empty()) << "no checkpoint saved";
  EXPECT_GE(std::stoll(latest), 4);
  const std::vector<MetricsLine> metrics = read_metrics(run + "/metrics.jsonl");
  ASSERT_FALSE(metrics.empty());
  EXPECT_EQ(std::stoll(latest), metrics.back().step) << "the checkpoint is the last step recorded";
  EXPECT_TRUE(fs::exists(run + "/report.html"));
}

INSTANTIATE_TEST_SUITE_P(LogInterval, TrainerOutputPipeTest, ::testing::Values(1, 100000));

// Nobody reads the output from the start (`stepgraph train ... | true`): the run trains to its end regardless.
TEST_F(TrainerOutputTest, ARunWhoseOutputHasNoReaderTrainsToItsEnd) {
  const std::string run = path("run"), ckpt = path("ckpt");
  const PipedChild child = spawn_into_pipe(tiny_model(
      {"train.train_iters=3", "logger.log_interval=1", "checkpoint.save=" + ckpt, "--run-dir", run, "--cpu"}));
  ASSERT_GT(child.pid, 0);
  ::close(child.read_end);
  int status = 0;
  ASSERT_EQ(::waitpid(child.pid, &status, 0), child.pid);
  EXPECT_EQ(shell_status(status), 0) << "141: killed by SIGPIPE";
  EXPECT_EQ(trim(read_file(ckpt + "/latest_checkpointed_iteration.txt")), "3");
  EXPECT_EQ(count_lines(run + "/metrics.jsonl"), 3u);
  EXPECT_TRUE(fs::exists(run + "/report.html"));
}

// A disk that fills under the TensorBoard event file stops the run with the file's error and exit status 1, as
// one under metrics.jsonl does (TrainerLifecycleTest.AFullDiskForMetricsFailsTheRunAfterSavingIt: the same path
// saves the checkpoint first; here every file is limited, so the run has no checkpoint.save).
TEST_F(TrainerOutputTest, AFullDiskForTensorBoardEventsFailsTheRun) {
  if (!kSmallFileSizeLimitWorks) GTEST_SKIP() << "ThreadSanitizer cannot start under an 8 KiB file limit";
  const std::string run = path("run"), tb = path("tb");
  // Per step the event file grows by some 350 bytes and metrics.jsonl by some 230: with every file limited to
  // 8 KiB (config.yaml, about 3 KiB, fits), the event file fails first, near step 23, and metrics.jsonl has not.
  const RunResult r =
      run_into_pipe(tiny_model({"train.train_iters=200", "--run-dir", run, "logger.tensorboard_dir=" + tb, "--cpu"}),
                    {.file_size_limit = 8192});
  const std::string& output = r.err;  // stdout and stderr, as one pipe got them
  EXPECT_EQ(r.rc, 1) << output;
  std::vector<fs::path> events;
  for (const auto& entry : fs::directory_iterator(tb)) events.push_back(entry.path());
  ASSERT_EQ(events.size(), 1u) << output;
  EXPECT_NE(output.find("error: cannot write TensorBoard events file " + events[0].string() +
                        " (logger.tensorboard_dir): File too large"),
            std::string::npos)
      << output;
  EXPECT_NE(output.find("the run stopped"), std::string::npos) << output;
  const size_t steps = count_lines(run + "/metrics.jsonl");
  EXPECT_GT(steps, 5u) << output;
  EXPECT_LT(steps, 200u) << "the run went on after the failure:\n" << output;
}

}  // namespace
