// Resuming after a stop, through the real binary on the CPU backend (a run-lifecycle audit): an evaluation a
// stop skipped is done first by the resumed run (a stop during it ends that run before its first step, the
// evaluation still due), which still trains bit for bit like an uninterrupted one; a
// checkpoint of other data sources is refused before any "resuming anyway"; a resumed run keeps no host copy of the
// checkpoint it loaded. Each case failed before its fix.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "checkpoint/safetensors.h"
#include "process_memory.h"
#include "train_cli_fixture.h"

namespace {

using namespace sg::test::train_cli;
namespace fs = std::filesystem;

using TrainerResumeCliTest = TrainerCliTest;

// "s" for a step record, "v" for an evaluation, with the step and the loss as printed.
std::vector<std::string> records(const fs::path& metrics) {
  std::vector<std::string> out;
  for (const auto& m : read_metrics(metrics)) {
    const nlohmann::json j = nlohmann::json::parse(m.raw);
    out.push_back(j.contains("val_loss") ? "v" + std::to_string(m.step) + " " + j["val_loss"].dump()
                                         : "s" + std::to_string(m.step) + " " + m.loss_text);
  }
  return out;
}

TEST_F(TrainerResumeCliTest, AnEvaluationAStopSkippedIsDoneFirstByTheResumedRun) {
  const std::string valid = "dataset.valid_data_path=[" + corpus_ + "]";
  const std::vector<std::string> common = {"train.train_iters=4", "train.eval_interval=2", valid};
  auto args = [&](std::vector<std::string> extra) {
    std::vector<std::string> a = common;
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  };
  // The uninterrupted run.
  RunResult r = train(args({"train.eval_iters=1", "--run-dir", path("full")}), "full");
  ASSERT_EQ(r.rc, 0) << r.all();

  // 10^6 validation batches after step 2: a SIGTERM lands inside that evaluation, which ends unrecorded.
  const std::string run = path("run"), ckpt = path("ckpt");
  const Child child =
      spawn(tiny_model(args({"train.eval_iters=1000000", "checkpoint.save=" + ckpt, "--run-dir", run, "--cpu"})),
            dir_ / "stopped");
  KillOnExit guard{child.pid};
  const MetricsWait waited = wait_for_metrics_lines(guard, run + "/metrics.jsonl", 2, std::chrono::seconds(60));
  ASSERT_FALSE(waited.ended) << "ended before the signal:\n" << read_file(child.err_path);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // well into the evaluation
  ASSERT_EQ(::kill(child.pid, SIGTERM), 0);
  r = wait_for(child, kRunTimeout);
  guard.release();
  ASSERT_EQ(r.rc, 143) << r.all();
  ASSERT_EQ(trim(read_file(ckpt + "/latest_checkpointed_iteration.txt")), "2") << r.all();
  EXPECT_TRUE(nlohmann::json::parse(read_file(ckpt + "/iter_0000002/train_state.json"))["extra"]["eval_pending"]);
  EXPECT_NE(r.err.find("interrupted by SIGTERM after step 2 of 4"), std::string::npos) << r.all();
  EXPECT_NE(r.err.find("saved " + ckpt + "/iter_0000002: to continue, run the same command with checkpoint.load=" +
                       ckpt),
            std::string::npos)
      << r.all();
  EXPECT_EQ(r.err.find(", val loss"), std::string::npos) << "no evaluation finished: none to show\n" << r.all();

  // Resumed, and stopped again inside that evaluation: the run ends before step 3 (whose save would record no
  // pending evaluation), and step 2's checkpoint still says the evaluation is due.
  const Child again = spawn(tiny_model(args({"train.eval_iters=1000000", "checkpoint.load=" + ckpt,
                                             "checkpoint.save=" + ckpt, "--run-dir", run, "--cpu"})),
                            dir_ / "stopped_again");
  KillOnExit again_guard{again.pid};
  const MetricsWait in_evaluation = wait_for_text(again_guard, again.err_path,
                                                  "step 2: the evaluation a stop skipped there, first",
                                                  std::chrono::seconds(60));
  ASSERT_FALSE(in_evaluation.ended) << "ended before the signal:\n" << read_file(again.err_path);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ASSERT_EQ(::kill(again.pid, SIGTERM), 0);
  r = wait_for(again, kRunTimeout);
  again_guard.release();
  ASSERT_EQ(r.rc, 143) << r.all();
  EXPECT_NE(r.err.find("stopping at step 2, before its next step"), std::string::npos) << r.all();
  EXPECT_EQ(trim(read_file(ckpt + "/latest_checkpointed_iteration.txt")), "2") << r.all();
  EXPECT_FALSE(fs::exists(ckpt + "/iter_0000003")) << r.all();
  EXPECT_TRUE(nlohmann::json::parse(read_file(ckpt + "/iter_0000002/train_state.json"))["extra"]["eval_pending"]);

  // Resumed: the evaluation of step 2 first, then steps 3-4; every record as the uninterrupted run's.
  r = train(args({"train.eval_iters=1", "checkpoint.load=" + ckpt, "checkpoint.save=" + ckpt, "--run-dir", run}),
            "resumed");
  ASSERT_EQ(r.rc, 0) << r.all();
  EXPECT_NE(r.err.find("step 2: the evaluation a stop skipped there, first"), std::string::npos) << r.all();
  const std::vector<std::string> full = records(path("full") + "/metrics.jsonl");
  ASSERT_EQ(full.size(), 6u);  // s1 s2 v2 s3 s4 v4
  EXPECT_EQ(records(run + "/metrics.jsonl"), full);
  EXPECT_FALSE(
      nlohmann::json::parse(read_file(ckpt + "/iter_0000004/train_state.json"))["extra"].contains("eval_pending"));
}

TEST_F(TrainerResumeCliTest, ACheckpointOfOtherDataSourcesIsRefusedWithoutResumingAnyway) {
  RunResult r = train({"train.train_iters=2", "checkpoint.save=" + path("ckpt"), "--run-dir", path("run")}, "save");
  ASSERT_EQ(r.rc, 0) << r.all();
  r = train({"train.train_iters=4", "dataset.data_path=[" + corpus_ + ", " + corpus_ + "]",
             "checkpoint.load=" + path("ckpt"), "checkpoint.save=" + path("ckpt2"), "--run-dir", path("run2")},
            "two_sources");
  EXPECT_EQ(r.rc, 1) << r.all();
  EXPECT_NE(r.err.find(path("ckpt") + "/iter_0000002/train_state.json: its data position counts 1 data source(s) "
                                      "but this run's data has 2"),
            std::string::npos)
      << r.all();
  EXPECT_EQ(r.err.find("resuming anyway"), std::string::npos) << r.all();
  EXPECT_EQ(r.err.find("training steps"), std::string::npos) << "refused before the backend:\n" << r.all();
}

// A resumed run does not keep the loaded checkpoint (fp32 weights and both moments: 12 bytes a parameter) once the
// backend has it: its peak memory, a save included, is that of a fresh run of the same model. The resume reads the
// checkpoint's mapped files (no private copy: CheckpointView.AResumeHoldsNoPrivateHostCopyOfTheState), whose pages
// count in the resident set while mapped, so the peak resident set measured here is what tells whether the run
// unmapped them before its save (LoadedCheckpoint::release_state). An embedding-heavy model (8.4M parameters, about
// 100 MB a copy) so that one copy stands well above the noise.
TEST_F(TrainerResumeCliTest, AResumedRunKeepsNoHostCopyOfTheCheckpoint) {
  if (sg::test::kSanitizedAllocator) GTEST_SKIP() << "a sanitizer's allocator keeps freed memory resident";
  const std::vector<std::string> wide = {"model.vocab_size=65536", "checkpoint.save=" + path("ckpt")};
  auto args = [&](std::vector<std::string> extra) {
    extra.insert(extra.end(), wide.begin(), wide.end());
    return extra;
  };
  const RunResult fresh = train(args({"train.train_iters=2", "--run-dir", path("run")}), "fresh");
  ASSERT_EQ(fresh.rc, 0) << fresh.all();
  const RunResult resumed =
      train(args({"train.train_iters=4", "checkpoint.load=" + path("ckpt"), "--run-dir", path("run")}), "resumed");
  ASSERT_EQ(resumed.rc, 0) << resumed.all();
  ASSERT_NE(resumed.err.find("resumed from"), std::string::npos) << resumed.all();
  ASSERT_GT(fresh.max_rss_kb, 0);
  const long copy_kb = 8388608L * 12 / 1024;  // the embedding and the LM head alone
  EXPECT_LT(resumed.max_rss_kb - fresh.max_rss_kb, copy_kb / 2)
      << "peak resident memory: fresh " << fresh.max_rss_kb << " KB, resumed " << resumed.max_rss_kb << " KB";
}

}  // namespace
