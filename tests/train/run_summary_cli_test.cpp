// The line `stepgraph train` ends with, through the real binary on the CPU backend: a run stopped by a signal
// says so there (not "trained", as a finished run does), with what was saved and how to go on; a run without
// checkpoint.save says at its start and in that line that its weights are not kept, and how to keep them. And
// train/run_end's wording of every ending the summary knows, in process. Each case failed before its fix.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "checkpoint/checkpoint_dir.h"
#include "checkpoint/safetensors.h"
#include "config/config.h"
#include "train/run_end.h"
#include "train/trainer.h"
#include "train_cli_fixture.h"

namespace {

using namespace sg::test::train_cli;
namespace fs = std::filesystem;

// The last line of a run's stderr.
std::string last_line(const std::string& text) {
  const std::string t = trim(text);
  const size_t nl = t.rfind('\n');
  return nl == std::string::npos ? t : t.substr(nl + 1);
}

bool starts_with(const std::string& text, const std::string& prefix) {
  return text.rfind(prefix, 0) == 0;
}

class RunSummaryCliTest : public TrainerCliTest {
 protected:
  // A run long enough never to finish here, sent `signal` once it has recorded a step.
  RunResult stopped_run(const std::string& run_dir, std::vector<std::string> extra, int signal) {
    extra.insert(extra.end(), {"train.train_iters=1000000", "--run-dir", run_dir, "--cpu"});
    const Child child = spawn(tiny_model(extra), dir_ / "stopped");
    KillOnExit guard{child.pid};
    if (wait_for_metrics_lines(guard, run_dir + "/metrics.jsonl", 1, std::chrono::seconds(120)).ended) {
      RunResult r;
      r.err = "ended before the signal:\n" + read_file(child.err_path);
      return r;
    }
    ::kill(child.pid, signal);
    guard.release();
    return wait_for(child, kRunTimeout);
  }
};

int64_t last_step(const std::string& metrics) {
  const std::vector<MetricsLine> lines = read_metrics(metrics);
  return lines.empty() ? -1 : lines.back().step;
}

TEST_F(RunSummaryCliTest, AStopBySignalSaysSoInTheLastLineWithHowToContinue) {
  const std::string run = path("run"), ckpt = path("ckpt");
  const RunResult r = stopped_run(run, {"checkpoint.save=" + ckpt}, SIGTERM);
  ASSERT_EQ(r.rc, 128 + SIGTERM) << r.all();
  const int64_t step = last_step(run + "/metrics.jsonl");
  ASSERT_GT(step, 0) << r.all();
  const std::string last = last_line(r.err);
  EXPECT_TRUE(starts_with(last, "stopped by SIGTERM after " + std::to_string(step) + " steps (0 -> " +
                                    std::to_string(step) + " of 1000000): loss "))
      << r.all();
  EXPECT_NE(last.find("; metrics in " + run + "/metrics.jsonl, report in " + run + "/report.html; saved " + ckpt + "/" +
                      sg::checkpoint::iteration_dir_name(step) +
                      ": to continue, run the same command with checkpoint.load=" + ckpt),
            std::string::npos)
      << r.all();
  EXPECT_TRUE(fs::is_directory(ckpt + "/" + sg::checkpoint::iteration_dir_name(step))) << r.all();
  EXPECT_EQ(r.err.find("trained "), std::string::npos) << "a stopped run is no finished one:\n" << r.all();
  EXPECT_EQ(r.err.find("not saved"), std::string::npos) << r.all();
  EXPECT_EQ(r.err.find("to continue"), r.err.rfind("to continue")) << "said once, last:\n" << r.all();
}

TEST_F(RunSummaryCliTest, AStopWithoutCheckpointSaveSaysNothingWasSavedAndHowToSave) {
  const std::string run = path("run");
  const RunResult r = stopped_run(run, {}, SIGINT);
  ASSERT_EQ(r.rc, 128 + SIGINT) << r.all();
  const int64_t step = last_step(run + "/metrics.jsonl");
  ASSERT_GT(step, 0) << r.all();
  const std::string last = last_line(r.err);
  EXPECT_TRUE(starts_with(last, "stopped by SIGINT after " + std::to_string(step) + " steps (0 -> " +
                                    std::to_string(step) + " of 1000000): loss "))
      << r.all();
  EXPECT_NE(last.find("; nothing was saved (checkpoint.save is not set): a new run starts again from step 0; add "
                      "checkpoint.save=DIR"),
            std::string::npos)
      << r.all();
}

TEST_F(RunSummaryCliTest, AFinishedRunWithoutCheckpointSaveSaysItsWeightsWereNotSaved) {
  RunResult r = train({"train.train_iters=2", "--run-dir", path("run")}, "unsaved");
  ASSERT_EQ(r.rc, 0) << r.all();
  const std::string last = last_line(r.err);
  EXPECT_TRUE(starts_with(last, "trained 2 steps (0 -> 2): loss ")) << r.all();
  const std::string at_end = sg::train::unsaved_weights_note(/*ended=*/true);
  EXPECT_NE(at_end.find("checkpoint.save=DIR"), std::string::npos) << at_end;
  EXPECT_EQ(last.substr(last.size() - at_end.size()), at_end) << r.all();
  // Said at the start too, before any step (a long run can still be restarted with it).
  const size_t note = r.err.find(sg::train::unsaved_weights_note(/*ended=*/false));
  ASSERT_NE(note, std::string::npos) << r.all();
  EXPECT_LT(note, r.err.find("training steps")) << r.all();

  // With checkpoint.save: neither.
  r = train({"train.train_iters=2", "checkpoint.save=" + path("ckpt"), "--run-dir", path("saved")}, "saved");
  ASSERT_EQ(r.rc, 0) << r.all();
  EXPECT_EQ(r.err.find("not be saved"), std::string::npos) << r.all();
  EXPECT_EQ(r.err.find("not saved"), std::string::npos) << r.all();
  EXPECT_TRUE(starts_with(last_line(r.err), "trained 2 steps (0 -> 2): loss ")) << r.all();
}

// ---- every ending's last line, in process ----

sg::train::TrainSummary summary(int64_t start, int64_t done, int64_t iters) {
  sg::train::TrainSummary s;
  s.start_step = start;
  s.steps_done = done;
  s.train_iters = iters;
  s.first_loss = 5.5f;
  s.last_loss = 4.25f;
  s.metrics_path = "runs/x/metrics.jsonl";
  s.report_path = "runs/x/report.html";
  return s;
}

TEST(RunSummaryLine, SaysHowTheRunEndedAndWhatToDoNext) {
  sg::config::Config c;
  c.checkpoint.save = "/ck";
  // Finished and saved: nothing to add.
  sg::train::TrainSummary s = summary(0, 40, 40);
  s.last_val_loss = 4.5;
  s.end_note = sg::train::run_end_note(c, s);
  EXPECT_EQ(s.end_note, "");
  EXPECT_EQ(sg::train::run_summary_line(s),
            "trained 40 steps (0 -> 40): loss 5.5000 -> 4.2500, val loss 4.5000; metrics in runs/x/metrics.jsonl, "
            "report in runs/x/report.html");

  // Resumed, stopped by a signal: says so, of how many, and how to go on (the stop summary's own advice).
  s = summary(10, 11, 40);
  s.stopped_by_signal = true;
  s.stop_signal = SIGTERM;
  s.end_note = sg::train::run_end_note(c, s);
  EXPECT_NE(s.end_note.find("saved /ck/iter_0000011: to continue"), std::string::npos) << s.end_note;
  EXPECT_EQ(sg::train::run_summary_line(s),
            "stopped by SIGTERM after 1 step (10 -> 11 of 40): loss 5.5000 -> 4.2500; metrics in "
            "runs/x/metrics.jsonl, report in runs/x/report.html; " +
                s.end_note);

  // Data parallel: another rank's stop (no signal here) is no finished run either.
  s = summary(0, 3, 40);
  s.end_note = sg::train::run_end_note(c, s);
  EXPECT_EQ(sg::train::run_summary_line(s).rfind("stopped early after 3 steps (0 -> 3 of 40): loss ", 0), 0u)
      << sg::train::run_summary_line(s);
  EXPECT_NE(s.end_note.find("to continue"), std::string::npos) << s.end_note;

  // Without checkpoint.save: finished, the weights were not saved; stopped, nothing was.
  c.checkpoint.save.reset();
  s = summary(0, 40, 40);
  EXPECT_EQ(sg::train::run_end_note(c, s), sg::train::unsaved_weights_note(/*ended=*/true));
  s = summary(0, 3, 40);
  EXPECT_EQ(sg::train::run_end_note(c, s).rfind("nothing was saved (checkpoint.save is not set)", 0), 0u);
}

}  // namespace
