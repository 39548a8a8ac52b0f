// checkpoint.most_recent_k in real training runs on the CPU backend (train/save_dir_policy.h
// apply_checkpoint_retention): a run saving every step keeps the k newest iteration folders after each save, with one
// log line per pass; changing k on a resume is not another configuration (retention is not in the config hash); a
// removal that fails is a warning naming the folder and the reason, and the run goes on.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "checkpoint/checkpoint_dir.h"
#include "checkpoint/retention.h"
#include "config/config.h"
#include "core/error.h"
#include "graph/registry.h"
#include "test_dir.h"
#include "train/cpu_training_runs.h"
#include "train/trainer.h"

namespace sg::train {
namespace {

namespace fs = std::filesystem;

using Scratch = test::ScratchDir;

// A one-layer model the CPU trains in milliseconds a step, on mock data, saving every step.
config::Config tiny(const std::vector<std::string>& extra) {
  std::vector<std::string> o = {"checkpoint.save_interval=1"};
  o.insert(o.end(), extra.begin(), extra.end());
  return test::one_layer_cpu_config(o);
}

using RunOutcome = test::CpuRunOutcome;

RunOutcome run(const config::Config& c, const std::string& run_dir, TrainOptions options = {}) {
  options.run_dir = run_dir;
  return test::train_on_cpu(c, options);
}

// DIR's entries but the lock and the latest file, sorted.
std::vector<std::string> entries(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name != checkpoint::kLatestFile && name != ".lock") out.push_back(name);
  }
  std::sort(out.begin(), out.end());
  return out;
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

std::string config_hash(const std::string& folder) {
  return nlohmann::json::parse(test::read_file(folder + "/" + checkpoint::kTrainStateFile))["config_hash"];
}

TEST(CheckpointRetention, ARunSavingEveryStepKeepsTheKNewestAfterEachSave) {
  Scratch dir("retention_run");
  const std::string ck = dir / "ck";
  TrainOptions options;
  std::vector<std::vector<int64_t>> after_save;  // the iteration folders right after each save
  options.on_saved = [&](int64_t step) {
    after_save.push_back(checkpoint::list_iterations(ck));
    EXPECT_EQ(checkpoint::read_latest_iteration(ck), step);  // the folder `latest` names is never removed
  };
  const RunOutcome r =
      run(tiny({"train.train_iters=5", "checkpoint.save=" + ck, "checkpoint.most_recent_k=2"}), dir / "run", options);
  ASSERT_EQ(r.error, "") << r.log;
  EXPECT_EQ(r.summary.steps_done, 5);
  EXPECT_EQ(after_save, (std::vector<std::vector<int64_t>>{{1}, {1, 2}, {2, 3}, {3, 4}, {4, 5}}));
  EXPECT_EQ(entries(ck), (std::vector<std::string>{"iter_0000004", "iter_0000005"}));
  EXPECT_EQ(checkpoint::resolve_checkpoint(ck), ck + "/iter_0000005");
  // One line a pass that removed something, after the save's own line.
  EXPECT_EQ(count(r.log, "checkpoint.most_recent_k=2: removed"), 3u) << r.log;
  const std::string line =
      "checkpoint.most_recent_k=2: removed iter_0000001 from " + ck + " (kept iter_0000002, iter_0000003)";
  EXPECT_NE(r.log.find(line), std::string::npos) << r.log;
  EXPECT_LT(r.log.find("saved checkpoint " + ck + "/iter_0000003"), r.log.find(line)) << r.log;
  EXPECT_EQ(r.log.find("warning"), std::string::npos) << r.log;
}

// Retention changes no number the run computes: a resume with another k is the same configuration (no warning, the
// same config hash in train_state.json), and the new k applies from its first save.
TEST(CheckpointRetention, ChangingKOnAResumeIsNotAnotherConfiguration) {
  Scratch dir("retention_resume");
  const std::string ck = dir / "ck";
  RunOutcome r = run(tiny({"train.train_iters=3", "checkpoint.save=" + ck}), dir / "run");
  ASSERT_EQ(r.error, "") << r.log;
  EXPECT_EQ(checkpoint::list_iterations(ck), (std::vector<int64_t>{1, 2, 3}));  // -1: every one kept
  EXPECT_EQ(r.log.find("most_recent_k"), std::string::npos) << r.log;
  const std::string hash = config_hash(ck + "/iter_0000003");

  r = run(tiny({"train.train_iters=4", "checkpoint.save=" + ck, "checkpoint.load=" + ck, "checkpoint.most_recent_k=1"}),
          dir / "run");
  ASSERT_EQ(r.error, "") << r.log;
  EXPECT_EQ(r.summary.start_step, 3);
  EXPECT_EQ(r.log.find("different configuration"), std::string::npos) << r.log;
  EXPECT_NE(r.log.find("checkpoint.most_recent_k=1: removed iter_0000001, iter_0000002, iter_0000003 from " + ck +
                       " (kept iter_0000004)"),
            std::string::npos)
      << r.log;
  EXPECT_EQ(checkpoint::list_iterations(ck), (std::vector<int64_t>{4}));
  EXPECT_EQ(config_hash(ck + "/iter_0000004"), hash);

  r = run(
      tiny({"train.train_iters=6", "checkpoint.save=" + ck, "checkpoint.load=" + ck, "checkpoint.most_recent_k=-1"}),
      dir / "run");
  ASSERT_EQ(r.error, "") << r.log;
  EXPECT_EQ(r.log.find("different configuration"), std::string::npos) << r.log;
  EXPECT_EQ(checkpoint::list_iterations(ck), (std::vector<int64_t>{4, 5, 6}));
  EXPECT_EQ(config_hash(ck + "/iter_0000006"), hash);
}

// A removal that fails (here injected: root ignores permissions, so a read-only folder would not fail for it) is a
// warning naming the folder and the reason; the save stands and the run trains to its end. A folder whose rename
// failed is still a whole checkpoint and stays; a half-done removal's folder is finished by the next save's pass.
TEST(CheckpointRetention, AFailedRemovalWarnsAndTheRunGoesOn) {
  Scratch dir("retention_fail");
  const std::string ck = dir / "ck";
  TrainOptions options;
  bool failed_once = false;
  options.on_checkpoint_removal = [&](const std::string& stage, const std::string& path) {
    if (stage == "rename" && path == ck + "/iter_0000002") throw Error("Permission denied (injected)");
    if (stage == "remove" && path == ck + "/iter_0000001.removing" && !failed_once) {
      failed_once = true;
      throw Error("Device or resource busy (injected)");
    }
  };
  const RunOutcome r =
      run(tiny({"train.train_iters=4", "checkpoint.save=" + ck, "checkpoint.most_recent_k=1"}), dir / "run", options);
  ASSERT_EQ(r.error, "") << r.log;
  EXPECT_EQ(r.summary.steps_done, 4);
  EXPECT_FALSE(r.summary.stopped_by_signal);
  const std::string after = ". The save itself succeeded and the run goes on; the next save tries again";
  EXPECT_NE(r.log.find("warning: checkpoint.most_recent_k=1: cannot remove " + ck +
                       "/iter_0000001.removing: Device or resource busy (injected)" + after),
            std::string::npos)
      << r.log;
  EXPECT_EQ(count(r.log, "warning: checkpoint.most_recent_k=1: cannot rename " + ck + "/iter_0000002 to " + ck +
                             "/iter_0000002.removing: Permission denied (injected)" + after),
            2u)
      << r.log;  // at the saves of steps 3 and 4
  // Step 3's pass finished step 2's removal of iter_0000001.
  EXPECT_NE(r.log.find("checkpoint.most_recent_k=1: removed iter_0000001.removing, left by an earlier removal that "
                       "did not finish, from " +
                       ck),
            std::string::npos)
      << r.log;
  EXPECT_EQ(entries(ck), (std::vector<std::string>{"iter_0000002", "iter_0000004"}));
  EXPECT_EQ(checkpoint::read_latest_iteration(ck), 4);
}

}  // namespace
}  // namespace sg::train
