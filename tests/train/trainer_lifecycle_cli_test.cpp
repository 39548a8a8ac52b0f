// `stepgraph train` as a hostile tester drives it (issue 17), through the real binary on the CPU
// backend: NaN stops that never save a non-finite state, save directories that belong to one run
// (resume / refuse / overwrite, one run at a time), metrics that agree with the checkpoint, and bad
// input refused before training: an unusable save path, a config that does not fit in host memory,
// a damaged train state; a stop during an evaluation, a disk too full for metrics and report, advice
// after a corrupt checkpoint that works. Each case failed (or passed silently) before.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "checkpoint/finite_check.h"
#include "checkpoint/safetensors.h"
#include "checkpoint/save_dir_lock.h"
#include "train_cli_fixture.h"

namespace {

using namespace sg::test::train_cli;
namespace fs = std::filesystem;

size_t occurrences(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

// Every float in every safetensors file of an iteration folder is finite.
void expect_all_finite(const fs::path& folder) {
  for (const char* file : {"model.safetensors", "optimizer_main_params.safetensors", "optimizer_exp_avg.safetensors",
                           "optimizer_exp_avg_sq.safetensors"}) {
    const auto bad = sg::checkpoint::find_nonfinite(sg::checkpoint::SafetensorsFile((folder / file).string()));
    EXPECT_FALSE(bad.has_value()) << folder / file << ": " << (bad ? describe(*bad) : "");
  }
}

using TrainerLifecycleTest = TrainerCliTest;

// lr 1e30: Adam's first update moves every weight by about 1e30, so step 2 overflows.
const std::vector<std::string> kDiverges = {"optimizer.lr=1e30", "train.train_iters=10", "checkpoint.save_interval=1"};

TEST_F(TrainerLifecycleTest, ANanStopsTheRunWithExit3AndNothingNonFiniteIsSaved) {
  // The recipe's defaults: both checks on.
  std::vector<std::string> args = kDiverges;
  args.insert(args.end(), {"checkpoint.save=" + path("ckpt"), "--run-dir", path("run")});
  const RunResult r = train(args, "nan");
  EXPECT_EQ(r.rc, 3) << r.all();
  const size_t finished = count_lines(path("run") + "/metrics.jsonl");
  ASSERT_GE(finished, 1u) << r.all();
  const std::string step = "step " + std::to_string(finished + 1) + ":";
  EXPECT_NE(r.err.find("error: " + step), std::string::npos) << r.all();
  EXPECT_EQ(occurrences(r.err, step), 1u) << "reported once, before the backend is released:\n" << r.err;
  EXPECT_NE(r.err.find("rerun_state_machine.check_for_nan_in_loss"), std::string::npos) << r.err;
  // Saved: every finished step (save_interval 1), never the non-finite one.
  EXPECT_EQ(trim(read_file(path("ckpt") + "/latest_checkpointed_iteration.txt")), std::to_string(finished));
  for (const auto& e : fs::directory_iterator(path("ckpt"))) {
    if (e.is_directory()) expect_all_finite(e.path());
  }
}

TEST_F(TrainerLifecycleTest, WithTheChecksOffANonFiniteStateIsStillNeverSaved) {
  std::vector<std::string> args = kDiverges;
  args.insert(args.end(), {"rerun_state_machine.check_for_nan_in_loss=false", "ddp.check_for_nan_in_grad=false",
                           "checkpoint.save=" + path("ckpt"), "--run-dir", path("run")});
  const RunResult r = train(args, "nan_unchecked");
  EXPECT_EQ(r.rc, 3) << r.all();
  EXPECT_NE(r.err.find("not saving a checkpoint"), std::string::npos) << r.all();
  EXPECT_NE(r.err.find("non-finite"), std::string::npos) << r.all();
  const std::string latest = trim(read_file(path("ckpt") + "/latest_checkpointed_iteration.txt"));
  ASSERT_FALSE(latest.empty()) << r.all();
  for (const auto& e : fs::directory_iterator(path("ckpt"))) {
    if (e.is_directory()) expect_all_finite(e.path());
  }
}

TEST_F(TrainerLifecycleTest, ASaveDirectoryWithCheckpointsIsResumedRefusedOrOverwritten) {
  const std::string ow = path("ow");
  RunResult r = train({"train.train_iters=5", "checkpoint.save=" + ow, "--run-dir", path("run_a")}, "a");
  ASSERT_EQ(r.rc, 0) << r.all();
  const std::string first = read_file(ow + "/iter_0000005/model.safetensors");

  // Another run (another shape, too) is refused: nothing in ow changes.
  r = train({"train.train_iters=2", "model.hidden_size=128", "model.ffn_hidden_size=256", "checkpoint.save=" + ow,
             "--run-dir", path("run_b")},
            "b");
  EXPECT_EQ(r.rc, 1) << r.all();
  for (const char* option : {"already holds checkpoints", "checkpoint.load=", "checkpoint.auto_resume=true",
                             "checkpoint.overwrite=true", "latest 5"}) {
    EXPECT_NE(r.err.find(option), std::string::npos) << option << "\n" << r.err;
  }
  EXPECT_FALSE(fs::exists(path("run_b") + "/metrics.jsonl"));
  EXPECT_TRUE(read_file(ow + "/iter_0000005/model.safetensors") == first);
  EXPECT_EQ(trim(read_file(ow + "/latest_checkpointed_iteration.txt")), "5");

  // checkpoint.auto_resume continues it; so does Bridge's checkpoint.load = checkpoint.save.
  r = train({"train.train_iters=6", "checkpoint.save=" + ow, "checkpoint.auto_resume=true", "--run-dir",
             path("run_c")},
            "c");
  EXPECT_EQ(r.rc, 0) << r.all();
  EXPECT_NE(r.err.find("resumed from " + ow + "/iter_0000005"), std::string::npos) << r.all();
  r = train({"train.train_iters=7", "checkpoint.save=" + ow, "checkpoint.load=" + ow, "--run-dir", path("run_d")}, "d");
  EXPECT_EQ(r.rc, 0) << r.all();
  EXPECT_NE(r.err.find("resumed from " + ow + "/iter_0000006"), std::string::npos) << r.all();

  // An older iteration of the same directory would move `latest` backwards: refused.
  r = train({"train.train_iters=8", "checkpoint.save=" + ow, "checkpoint.load=" + ow + "/iter_0000005", "--run-dir",
             path("run_e")},
            "e");
  EXPECT_EQ(r.rc, 1) << r.all();
  EXPECT_NE(r.err.find("older iteration"), std::string::npos) << r.all();

  // checkpoint.overwrite deletes them and starts over.
  r = train({"train.train_iters=2", "model.hidden_size=128", "model.ffn_hidden_size=256", "checkpoint.save=" + ow,
             "checkpoint.overwrite=true", "--run-dir", path("run_f")},
            "f");
  EXPECT_EQ(r.rc, 0) << r.all();
  EXPECT_NE(r.err.find("checkpoint.overwrite: removed iterations 5, 6, 7"), std::string::npos) << r.all();
  EXPECT_EQ(trim(read_file(ow + "/latest_checkpointed_iteration.txt")), "2");
  std::vector<std::string> folders;
  for (const auto& e : fs::directory_iterator(ow))
    if (e.is_directory()) folders.push_back(e.path().filename().string());
  EXPECT_EQ(folders, std::vector<std::string>{"iter_0000002"});
}

TEST_F(TrainerLifecycleTest, ASecondRunOnTheSaveDirectoryIsRefusedNamingTheHoldersPid) {
  // This test process plays the first run: it holds the lock as a run does.
  const sg::checkpoint::SaveDirLock held = sg::checkpoint::SaveDirLock::acquire(path("ckpt"), "checkpoint.save");
  const RunResult r = train({"train.train_iters=2", "checkpoint.save=" + path("ckpt"), "--run-dir", path("run")}, "second");
  EXPECT_EQ(r.rc, 1) << r.all();
  EXPECT_NE(r.err.find("in use by another stepgraph run (pid " + std::to_string(::getpid()) + " holds"),
            std::string::npos)
      << r.all();
  EXPECT_FALSE(fs::exists(path("run") + "/metrics.jsonl")) << "refused before any step";
}

TEST_F(TrainerLifecycleTest, ASecondRunInTheSameRunFolderAtOnceIsRefusedNamingTheHoldersPid) {
  // This test process plays a run still writing to the folder.
  const sg::checkpoint::SaveDirLock held =
      sg::checkpoint::SaveDirLock::acquire(path("run"), "the run folder (--run-dir)");
  RunResult r = train({"train.train_iters=2", "--run-dir", path("run")}, "concurrent");
  EXPECT_EQ(r.rc, 1) << r.all();
  EXPECT_NE(r.err.find("the run folder (--run-dir) " + path("run") + " is in use by another stepgraph run (pid " +
                       std::to_string(::getpid()) + " holds"),
            std::string::npos)
      << r.all();
  EXPECT_NE(r.err.find("two runs writing one run folder mix their records"), std::string::npos) << r.all();
  EXPECT_FALSE(fs::exists(path("run") + "/metrics.jsonl")) << "refused before any step";
  // A run folder that is checkpoint.save itself is covered by that one lock: the run goes ahead.
  r = train({"train.train_iters=2", "checkpoint.save=" + path("same"), "--run-dir", path("same")}, "same_folder");
  EXPECT_EQ(r.rc, 0) << r.all();
}

TEST_F(TrainerLifecycleTest, AnUnusableRunFolderIsRefusedBeforeAnythingLoads) {
  std::ofstream(path("a_file")) << "not a directory";
  const RunResult r = train({"train.train_iters=50", "--run-dir", path("a_file")}, "run_dir_file");
  EXPECT_EQ(r.rc, 1) << r.all();
  EXPECT_NE(r.err.find("the run folder (--run-dir) " + path("a_file") + " is a file, not a directory"),
            std::string::npos)
      << r.all();
  EXPECT_EQ(r.err.find("data:"), std::string::npos) << "refused before the data was opened:\n" << r.err;
}

TEST_F(TrainerLifecycleTest, AnUnusableSaveDirectoryIsRefusedBeforeTheFirstStep) {
  std::ofstream(path("a_file")) << "not a directory";
  const RunResult r = train({"train.train_iters=50", "checkpoint.save=" + path("a_file"), "--run-dir", path("run")},
                            "file");
  EXPECT_EQ(r.rc, 1) << r.all();
  EXPECT_NE(r.err.find("checkpoint.save " + path("a_file") + " is a file, not a directory"), std::string::npos)
      << r.all();
  EXPECT_FALSE(fs::exists(path("run") + "/metrics.jsonl")) << "refused before any step";
}

TEST_F(TrainerLifecycleTest, MetricsAreCutBackToTheCheckpointOnResume) {
  // A run reaches 8 with checkpoints at 5 and 8; resuming from 5 in the same run directory must
  // replace steps 6-8, not append them a second time.
  RunResult r = train({"train.train_iters=8", "checkpoint.save=" + path("ckpt"), "checkpoint.save_interval=5",
                       "--run-dir", path("run")},
                      "first");
  ASSERT_EQ(r.rc, 0) << r.all();
  r = train({"train.train_iters=8", "checkpoint.load=" + path("ckpt") + "/iter_0000005", "--run-dir", path("run")},
            "resume");
  ASSERT_EQ(r.rc, 0) << r.all();
  EXPECT_NE(r.err.find("moved its 3 records after step 5"), std::string::npos) << r.all();
  EXPECT_NE(r.err.find("trained 3 steps (5 -> 8)"), std::string::npos) << r.all();
  std::vector<int64_t> steps;
  for (const auto& m : read_metrics(path("run") + "/metrics.jsonl")) steps.push_back(m.step);
  EXPECT_EQ(steps, (std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7, 8}));
  // The first run's steps 6-8 are kept, not deleted (train/run_folder.h); the top level continues.
  steps.clear();
  for (const auto& m : read_metrics(path("run") + "/previous/run-1/metrics.jsonl")) steps.push_back(m.step);
  EXPECT_EQ(steps, (std::vector<int64_t>{6, 7, 8}));
  EXPECT_FALSE(fs::exists(path("run") + "/previous/run-1/run.json")) << "never brought back as a run's records";

  // At the end already: nothing to train, and no "trained ... metrics in <empty>" line.
  r = train({"train.train_iters=8", "checkpoint.load=" + path("ckpt"), "--run-dir", path("run")}, "done");
  EXPECT_EQ(r.rc, 0) << r.all();
  EXPECT_NE(r.err.find("nothing to train"), std::string::npos) << r.all();
  EXPECT_EQ(r.err.find("trained "), std::string::npos) << r.all();
}

TEST_F(TrainerLifecycleTest, ASecondRunInTheSameRunFolderKeepsTheFirstRunsRecords) {
  // The same recipe run twice writes to the same runs/<name>/: the first run's files move to previous/run-1/.
  RunResult r = train({"train.train_iters=3", "--run-dir", path("run")}, "first");
  ASSERT_EQ(r.rc, 0) << r.all();
  r = train({"train.train_iters=2", "--run-dir", path("run")}, "second");
  ASSERT_EQ(r.rc, 0) << r.all();
  EXPECT_NE(r.err.find(path("run") + " held the records of an earlier run: moved them to " + path("run") +
                       "/previous/run-1"),
            std::string::npos)
      << r.all();
  auto steps_of = [](const std::string& metrics) {
    std::vector<int64_t> steps;
    for (const auto& m : read_metrics(metrics)) steps.push_back(m.step);
    return steps;
  };
  EXPECT_EQ(steps_of(path("run") + "/previous/run-1/metrics.jsonl"), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(steps_of(path("run") + "/metrics.jsonl"), (std::vector<int64_t>{1, 2}));
  for (const char* file : {"config.yaml", "report.html"}) {
    EXPECT_TRUE(fs::exists(path("run") + "/previous/run-1/" + file)) << file;
    EXPECT_TRUE(fs::exists(path("run") + "/" + file)) << file;
  }
  EXPECT_NE(read_file(path("run") + "/previous/run-1/config.yaml").find("train_iters: 3"), std::string::npos);
}

TEST_F(TrainerLifecycleTest, ResumingARunAfterAnotherOneBringsItsRecordsBack) {
  // Run A, then run B in the same run folder (A's records move aside), then resume A from its step 2: B's
  // records move aside, A's come back and continue; nothing of either is cut or mixed.
  auto steps_of = [](const std::string& metrics) {
    std::vector<int64_t> steps;
    for (const auto& m : read_metrics(metrics)) steps.push_back(m.step);
    return steps;
  };
  RunResult r = train({"train.train_iters=4", "checkpoint.save=" + path("a"), "checkpoint.save_interval=2",
                       "--run-dir", path("run")},
                      "a");
  ASSERT_EQ(r.rc, 0) << r.all();
  r = train({"train.train_iters=3", "checkpoint.save=" + path("b"), "--run-dir", path("run")}, "b");
  ASSERT_EQ(r.rc, 0) << r.all();
  ASSERT_EQ(steps_of(path("run") + "/previous/run-1/metrics.jsonl"), (std::vector<int64_t>{1, 2, 3, 4}));
  r = train({"train.train_iters=4", "checkpoint.load=" + path("a") + "/iter_0000002", "--run-dir", path("run")},
            "resume_a");
  ASSERT_EQ(r.rc, 0) << r.all();
  EXPECT_NE(r.err.find("held the records of another run than the checkpoint's: moved them to " + path("run") +
                       "/previous/run-2"),
            std::string::npos)
      << r.all();
  EXPECT_NE(r.err.find("the checkpoint's run's records are back from " + path("run") + "/previous/run-1"),
            std::string::npos)
      << r.all();
  EXPECT_EQ(steps_of(path("run") + "/previous/run-2/metrics.jsonl"), (std::vector<int64_t>{1, 2, 3}));  // B's
  EXPECT_EQ(steps_of(path("run") + "/metrics.jsonl"), (std::vector<int64_t>{1, 2, 3, 4}));  // A's, 3-4 again
  // A's first steps 3-4, cut to continue from step 2, are kept where A's files came back from.
  EXPECT_EQ(steps_of(path("run") + "/previous/run-1/metrics.jsonl"), (std::vector<int64_t>{3, 4}));
  EXPECT_FALSE(fs::exists(path("run") + "/previous/run-1/run.json"));
  EXPECT_NE(read_file(path("a") + "/iter_0000004/train_state.json").find("\"run_id\""), std::string::npos);
}

TEST_F(TrainerLifecycleTest, AFullDiskForMetricsFailsTheRunAfterSavingIt) {
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  fs::create_directories(path("run"));
  fs::create_symlink("/dev/full", path("run") + "/metrics.jsonl");  // every write: ENOSPC
  const RunResult r = train({"train.train_iters=20", "checkpoint.save=" + path("ckpt"), "--run-dir", path("run")},
                            "full");
  EXPECT_EQ(r.rc, 1) << r.all();
  EXPECT_NE(r.err.find("cannot write metrics file " + path("run") + "/metrics.jsonl at step 1"), std::string::npos)
      << r.all();
  EXPECT_NE(r.err.find("No space left on device"), std::string::npos) << r.all();
  EXPECT_NE(r.err.find("the run stopped after saving step 1"), std::string::npos) << r.all();
  EXPECT_EQ(trim(read_file(path("ckpt") + "/latest_checkpointed_iteration.txt")), "1");
}

TEST_F(TrainerLifecycleTest, AConfigThatDoesNotFitInHostMemoryIsRefusedWithThePlan) {
  struct Case {
    std::vector<std::string> overrides;
    std::string key;  // the key the message points at
  };
  const Case cases[] = {
      {{"model.num_layers=65534", "model.hidden_size=4096", "model.ffn_hidden_size=11008",
        "model.num_attention_heads=32", "model.num_query_groups=32"},
       "model.num_layers"},
      {{"model.seq_length=65536", "dataset.seq_length=65536", "train.micro_batch_size=65536",
        "train.global_batch_size=65536"},
       "train.micro_batch_size"},
      {{"model.vocab_size=2000000000"}, "model.vocab_size"},
  };
  int i = 0;
  for (const Case& c : cases) {
    std::vector<std::string> args = c.overrides;
    args.insert(args.end(), {"train.train_iters=2", "--run-dir", path("run")});
    const RunResult r = train(args, "memory" + std::to_string(i++));
    SCOPED_TRACE(c.key);
    EXPECT_EQ(r.rc, 1) << r.all();
    EXPECT_NE(r.err.find("of host memory"), std::string::npos) << r.all();
    EXPECT_NE(r.err.find("is available ("), std::string::npos) << r.all();
    EXPECT_NE(r.err.find("Nothing was allocated"), std::string::npos) << r.all();
    EXPECT_NE(r.err.find(c.key), std::string::npos) << r.all();
    EXPECT_EQ(r.err.find("bad_alloc"), std::string::npos) << r.all();
    EXPECT_LT(r.seconds, 60.0) << "refused before allocating, not after growing";
  }
}

TEST_F(TrainerLifecycleTest, ADamagedTrainStateIsRefusedWithoutSourcePaths) {
  const RunResult saved = train({"train.train_iters=2", "checkpoint.save=" + path("ckpt"), "--run-dir", path("run")},
                                "save");
  ASSERT_EQ(saved.rc, 0) << saved.all();
  const std::string state_path = path("ckpt") + "/iter_0000002/train_state.json";
  const nlohmann::json good = nlohmann::json::parse(read_file(state_path));
  struct Damage {
    std::string key;
    nlohmann::json value;
    std::string expected;
  };
  const Damage damages[] = {
      {"rng_state", "00", "rng_state has 1 bytes"},
      {"consumed_samples", nlohmann::json(UINT64_MAX), "consumed_samples 18446744073709551615 does not fit iteration 2"},
  };
  for (const Damage& d : damages) {
    SCOPED_TRACE(d.key);
    nlohmann::json bad = good;
    // As a file saved before train states carried their own checksum: the field checks behind it still apply.
    bad.erase("crc32c");
    bad["version"] = 1;  // the format version of those files (a version-2 file without the key is refused)
    if (d.key == "consumed_samples") {
      bad["data_position"]["consumed_samples"] = d.value;
      bad["data_position"]["per_source"] = nlohmann::json::array({d.value});
    } else {
      bad[d.key] = d.value;
    }
    std::ofstream(state_path, std::ios::trunc) << bad.dump(2);
    const RunResult r = train({"train.train_iters=4", "checkpoint.load=" + path("ckpt"), "--run-dir", path("run2")},
                              "load_" + d.key);
    EXPECT_EQ(r.rc, 1) << r.all();
    EXPECT_NE(r.err.find(d.expected), std::string::npos) << r.all();
    EXPECT_EQ(r.err.find(".cpp:"), std::string::npos) << "a source path in a user-facing error:\n" << r.err;
  }
  // With the checksum kept, an edit is refused as damage before any field is read, naming the file.
  nlohmann::json edited = good;
  std::string rng = edited["rng_state"].get<std::string>();
  rng[0] = rng[0] == '0' ? '1' : '0';
  edited["rng_state"] = rng;
  std::ofstream(state_path, std::ios::trunc) << edited.dump(2);
  const RunResult r =
      train({"train.train_iters=4", "checkpoint.load=" + path("ckpt"), "--run-dir", path("run2")}, "load_edited");
  EXPECT_EQ(r.rc, 1) << r.all();
  EXPECT_NE(r.err.find("train state " + state_path + " is corrupt"), std::string::npos) << r.all();
  EXPECT_EQ(r.err.find(".cpp:"), std::string::npos) << "a source path in a user-facing error:\n" << r.err;
}

// A signal during an evaluation used to wait for all of it: the watchdog ended the run (1.5 s without
// checkpoint.save, 120 s with) with no final checkpoint and no report. The evaluation now ends early.
TEST_F(TrainerLifecycleTest, ASignalDuringAnEvaluationEndsItThenSavesAndReports) {
  const std::string run = path("run"), ckpt = path("ckpt");
  // 10^6 validation batches after step 2: the signal lands inside that evaluation.
  const Child child = spawn(
      tiny_model({"train.train_iters=100", "train.eval_interval=2", "train.eval_iters=1000000",
                  "dataset.valid_data_path=[" + corpus_ + "]", "checkpoint.save=" + ckpt, "--run-dir", run, "--cpu"}),
      dir_ / "eval_stop");
  KillOnExit guard{child.pid};
  const MetricsWait waited = wait_for_metrics_lines(guard, run + "/metrics.jsonl", 2, std::chrono::seconds(60));
  ASSERT_FALSE(waited.ended) << "ended before the signal:\n" << read_file(child.err_path);
  ASSERT_EQ(count_lines(run + "/metrics.jsonl"), 2u) << read_file(child.err_path);
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // well into the evaluation
  ASSERT_EQ(::kill(child.pid, SIGINT), 0);
  const RunResult r = wait_for(child, kRunTimeout);
  guard.release();
  EXPECT_EQ(r.rc, 130) << r.all();
  EXPECT_LT(r.seconds, 60.0) << r.all();
  EXPECT_EQ(r.err.find("did not stop within"), std::string::npos) << r.all();
  EXPECT_NE(r.err.find("the evaluation ended after"), std::string::npos) << r.all();
  EXPECT_EQ(trim(read_file(ckpt + "/latest_checkpointed_iteration.txt")), "2") << r.all();
  EXPECT_TRUE(fs::exists(run + "/report.html")) << r.all();
  EXPECT_EQ(read_file(run + "/metrics.jsonl").find("val_loss"), std::string::npos) << "a partial evaluation recorded";
}

// A disk too full for metrics.jsonl is also too full for report.html: the metrics error (the cause)
// used to be lost behind the report's.
TEST_F(TrainerLifecycleTest, AFullDiskForMetricsAndTheReportStillNamesTheMetricsError) {
  if (!kSmallFileSizeLimitWorks) GTEST_SKIP() << "ThreadSanitizer cannot start under an 8 KiB file limit";
  const std::string run = path("run");
  // Every file it writes limited to 8 KB: a write past it fails as on a full disk, for metrics.jsonl and
  // report.html alike (the output goes to a pipe, which the limit does not cover; metrics.jsonl -> /dev/full
  // cannot fail the report: it reads /dev/full). config.yaml (about 3 KB) fits; metrics.jsonl outgrows it after
  // some 30 steps, the report at once.
  const RunResult r =
      run_into_pipe(tiny_model({"train.train_iters=200", "logger.log_interval=1000", "--run-dir", run, "--cpu"}),
                    {.file_size_limit = 8192});
  EXPECT_EQ(r.rc, 1) << r.all();
  EXPECT_NE(r.err.find("error: cannot write metrics file " + run + "/metrics.jsonl at step"), std::string::npos)
      << r.all();
  EXPECT_NE(
      r.err.find("; the run stopped; the report could not be written either: cannot write " + run + "/report.html"),
      std::string::npos)
      << r.all();
}

// After a corrupt latest checkpoint the message names an earlier iteration and how to load it; both
// ways it names work (loading it into the same checkpoint.save alone is refused: `latest` would move back).
TEST_F(TrainerLifecycleTest, ACorruptLatestCheckpointNamesAnEarlierIterationThatLoads) {
  const std::string ckpt = path("ckpt");
  RunResult r =
      train({"train.train_iters=4", "checkpoint.save_interval=2", "checkpoint.save=" + ckpt, "--run-dir", path("run")},
            "save");
  ASSERT_EQ(r.rc, 0) << r.all();
  {
    std::fstream f(ckpt + "/iter_0000004/model.safetensors", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-1, std::ios::end);
    f.put('\x7f');
  }
  r = train({"train.train_iters=6", "checkpoint.save=" + ckpt, "checkpoint.auto_resume=true", "--run-dir", path("run")},
            "corrupt");
  EXPECT_EQ(r.rc, 1) << r.all();
  EXPECT_NE(r.err.find("is corrupt"), std::string::npos) << r.all();
  EXPECT_NE(r.err.find("set checkpoint.load=" + ckpt + "/iter_0000002 and checkpoint.save to another directory"),
            std::string::npos)
      << r.all();
  // What it says, done: another save directory ...
  r = train({"train.train_iters=6", "checkpoint.load=" + ckpt + "/iter_0000002", "checkpoint.save=" + path("ckpt2"),
             "--run-dir", path("run")},
            "other_save");
  EXPECT_EQ(r.rc, 0) << r.all();
  EXPECT_NE(r.err.find("resumed from " + ckpt + "/iter_0000002"), std::string::npos) << r.all();
  // ... or the damaged folder moved aside and `latest` pointed back.
  fs::rename(ckpt + "/iter_0000004", ckpt + "/iter_0000004.damaged");
  std::ofstream(ckpt + "/latest_checkpointed_iteration.txt", std::ios::trunc) << "2\n";
  r = train({"train.train_iters=6", "checkpoint.save=" + ckpt, "checkpoint.auto_resume=true", "--run-dir", path("run")},
            "moved_aside");
  EXPECT_EQ(r.rc, 0) << r.all();
  EXPECT_NE(r.err.find("resumed from " + ckpt + "/iter_0000002"), std::string::npos) << r.all();
}

}  // namespace
