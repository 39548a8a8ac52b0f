// What a run does at its edges, in process on the CPU backend (a run-lifecycle audit): checkpoint.overwrite
// removes nothing before the run's first save, a run that changed its global batch size resumes again, a save
// directory whose first save was killed before its latest file resumes, records cut back on a resume are kept,
// a damaged last metrics line is named as such, a signal at the very end is no interruption, and a stopped
// run says which step its validation loss is from, what was saved and how to continue. Each case failed
// before its fix.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "checkpoint/checkpoint_dir.h"
#include "checkpoint/train_state.h"
#include "config/config.h"
#include "config/model_config.h"
#include "core/error.h"
#include "graph/registry.h"
#include "model/layer_registry.h"
#include "test_dir.h"
#include "test_util.h"
#include "train/checkpointing.h"
#include "train/cpu_training_runs.h"
#include "train/nonfinite_stop.h"
#include "train/run_end.h"
#include "train/run_folder.h"
#include "train/save_dir_policy.h"
#include "train/trainer.h"

namespace sg::train {
namespace {

namespace fs = std::filesystem;

using Scratch = test::ScratchDir;

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

const auto error_of = test::exception_message;

// A one-layer model the CPU trains in milliseconds a step, on mock data; `extra` overrides (later ones win).
config::Config tiny(const std::vector<std::string>& extra) {
  std::vector<std::string> o = {"train.train_iters=8"};
  o.insert(o.end(), extra.begin(), extra.end());
  return test::one_layer_cpu_config(o);
}

using RunOutcome = test::CpuRunOutcome;

// Trains `c` in `run_dir`; a stop (SIGTERM) is requested right after the save of `stop_after_save`, as a signal
// arriving during that save.
RunOutcome run(const config::Config& c, const std::string& run_dir, int64_t stop_after_save = -1) {
  TrainOptions options;
  options.run_dir = run_dir;
  options.on_saved = [stop_after_save](int64_t step) {
    if (step == stop_after_save) graph::request_stop(SIGTERM);
  };
  return test::train_on_cpu(c, options);
}

std::vector<int64_t> iterations(const std::string& dir) {
  return checkpoint::list_iterations(dir);
}

// ---- 1. checkpoint.overwrite removes nothing before the run's first save ----

TEST(TrainerResume, CheckpointOverwriteRemovesNothingWhenTheRunIsRefused) {
  Scratch dir("overwrite");
  const std::string base = dir / "base";
  RunOutcome r =
      run(tiny({"train.train_iters=4", "checkpoint.save=" + base, "checkpoint.save_interval=2"}), dir / "run");
  ASSERT_EQ(r.error, "") << r.log;
  ASSERT_EQ(iterations(base), (std::vector<int64_t>{2, 4}));
  const std::string base_model = read_file(base + "/iter_0000004/model.safetensors");
  // Three checkpoint.load values the run refuses: a typo, a damaged checkpoint, another model's shapes.
  const std::string damaged = dir / "damaged";
  fs::copy(base, damaged, fs::copy_options::recursive);
  {
    std::fstream f(damaged + "/iter_0000004/model.safetensors", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-1, std::ios::end);
    f.put('\x7f');
  }
  const std::string other = dir / "other";
  r = run(tiny({"train.train_iters=2", "model.hidden_size=32", "model.ffn_hidden_size=64", "checkpoint.save=" + other}),
          dir / "run_other");
  ASSERT_EQ(r.error, "") << r.log;
  struct Refusal {
    std::string load, expected;
  };
  for (const Refusal& refusal :
       {Refusal{dir / "typo_dir", "no such directory"}, Refusal{damaged, "is corrupt"}, Refusal{other, "expected"}}) {
    SCOPED_TRACE(refusal.load);
    const std::string ow = dir / "ow";
    fs::remove_all(ow);
    fs::copy(base, ow, fs::copy_options::recursive);
    r = run(tiny({"train.train_iters=6", "checkpoint.save=" + ow, "checkpoint.overwrite=true",
                  "checkpoint.load=" + refusal.load}),
            dir / "run_ow");
    EXPECT_NE(r.error.find(refusal.expected), std::string::npos) << r.error;
    EXPECT_EQ(iterations(ow), (std::vector<int64_t>{2, 4})) << r.log;
    EXPECT_EQ(checkpoint::read_latest_iteration(ow), 4);
    EXPECT_TRUE(read_file(ow + "/iter_0000004/model.safetensors") == base_model);
    EXPECT_EQ(r.log.find("removed iterations"), std::string::npos) << r.log;
  }
  // A run that saves removes them right before its first save, and says so.
  const std::string ow = dir / "ow";
  r = run(tiny({"train.train_iters=3", "checkpoint.save=" + ow, "checkpoint.overwrite=true"}), dir / "run_ok");
  ASSERT_EQ(r.error, "") << r.log;
  EXPECT_EQ(iterations(ow), (std::vector<int64_t>{3}));
  const size_t stay = r.log.find("they stay until this run's first save");
  const size_t removed = r.log.find("checkpoint.overwrite: removed iterations 2, 4 (latest 4) from " + ow);
  const size_t saved = r.log.find("saved checkpoint " + ow + "/iter_0000003");
  EXPECT_NE(stay, std::string::npos) << r.log;
  EXPECT_NE(removed, std::string::npos) << r.log;
  EXPECT_LT(stay, removed);
  EXPECT_LT(removed, saved) << r.log;
}

// ---- 2. a run that changed train.global_batch_size resumes its own checkpoints ----

TEST(TrainerResume, ARunThatChangedItsGlobalBatchSizeResumesAgain) {
  Scratch dir("batch");
  const std::string ck1 = dir / "ck1", ck2 = dir / "ck2";
  RunOutcome r =
      run(tiny({"checkpoint.save=" + ck1, "checkpoint.save_interval=2"}), dir / "run1", /*stop_after_save=*/4);
  ASSERT_EQ(r.error, "") << r.log;
  ASSERT_EQ(r.summary.steps_done, 4);
  // Resumed with a global batch of 4: accepted (with a warning), saves at 6.
  const std::vector<std::string> batch4 = {"train.global_batch_size=4", "checkpoint.save_interval=2"};
  std::vector<std::string> args = batch4;
  args.insert(args.end(), {"checkpoint.load=" + ck1, "checkpoint.save=" + ck2});
  r = run(tiny(args), dir / "run2", 6);
  ASSERT_EQ(r.error, "") << r.log;
  EXPECT_NE(r.log.find("saved with a different configuration"), std::string::npos) << r.log;
  ASSERT_EQ(checkpoint::read_latest_iteration(ck2), 6);
  // metrics.jsonl's tokens: 4 steps of 2 sequences, then 4 a step (32 tokens each), not 4 a step since step 1.
  std::vector<int64_t> tokens;
  std::istringstream lines(read_file(dir / "run2/metrics.jsonl"));
  for (std::string line; std::getline(lines, line);) tokens.push_back(nlohmann::json::parse(line)["tokens"]);
  EXPECT_EQ(tokens, (std::vector<int64_t>{(8 + 4) * 32, (8 + 8) * 32}));
  // Its own checkpoint, with the same configuration, resumes (it was refused: "expected 24").
  args = batch4;
  args.insert(args.end(), {"checkpoint.load=" + ck2, "checkpoint.save=" + ck2});
  r = run(tiny(args), dir / "run2");
  ASSERT_EQ(r.error, "") << r.log;
  EXPECT_EQ(r.summary.steps_done, 8);
  EXPECT_EQ(r.log.find("different configuration"), std::string::npos) << r.log;

  // A consumed_samples edited (and the file sealed again) is still refused exactly: 4 x 2 + 2 x 4 = 16 at step 6.
  const std::string state_path = ck2 + "/iter_0000006/train_state.json";
  const nlohmann::json good = nlohmann::json::parse(read_file(state_path));
  ASSERT_EQ(good["extra"]["samples_baseline"], (nlohmann::json{{"iteration", 4}, {"consumed_samples", 8}}));
  ASSERT_EQ(good["data_position"]["consumed_samples"], 16);
  const auto write_sealed = [&](nlohmann::json j) {
    checkpoint::seal_train_state_json(j);
    std::ofstream(state_path, std::ios::trunc) << j.dump(2);
  };
  nlohmann::json edited = good;
  edited["consumed_samples"] = 17;
  edited["data_position"]["consumed_samples"] = 17;
  edited["data_position"]["per_source"] = {17};
  write_sealed(edited);
  const config::Config c = tiny(batch4);
  const model::ModelLayout layout = model::model_layout(config::model_spec(c));
  std::string e = error_of([&] { load_checkpoint(ck2 + "/iter_0000006", c, layout); });
  EXPECT_NE(e.find("consumed_samples 17 does not fit iteration 6 with a global batch of 4 sequences since iteration 4 "
                   "(8 samples then, when that batch size started) (expected 16)"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("the file was edited or damaged. " + ck2 + " holds no earlier iteration"), std::string::npos) << e;
  // A baseline past the file's own step is damage too.
  edited = good;
  edited["extra"]["samples_baseline"]["iteration"] = 7;
  write_sealed(edited);
  e = error_of([&] { load_checkpoint(ck2 + "/iter_0000006", c, layout); });
  EXPECT_NE(e.find("extra.samples_baseline"), std::string::npos) << e;
  // Unedited, it loads; a file without the key (every run that kept its batch size) checks from step 0.
  write_sealed(good);
  EXPECT_EQ(error_of([&] { load_checkpoint(ck2 + "/iter_0000006", c, layout); }), "");
  EXPECT_FALSE(
      nlohmann::json::parse(read_file(ck1 + "/iter_0000004/train_state.json"))["extra"].contains("samples_baseline"));
  EXPECT_EQ(error_of([&] { load_checkpoint(ck1 + "/iter_0000004", tiny({}), layout); }), "");
}

// ---- 4. a first save killed between its rename and the latest file ----

TEST(TrainerResume, ASaveDirectoryWithoutItsLatestFileResumesItsNewestIteration) {
  Scratch dir("no_latest");
  const std::string full = dir / "full", ck = dir / "ck";
  const std::vector<std::string> common = {"train.train_iters=3", "checkpoint.save_interval=1"};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> args = common;
    args.insert(args.end(), extra.begin(), extra.end());
    return tiny(args);
  };
  RunOutcome r = run(with({"checkpoint.save=" + full}), dir / "run_full");
  ASSERT_EQ(r.error, "") << r.log;
  r = run(with({"checkpoint.save=" + ck}), dir / "run", /*stop_after_save=*/1);
  ASSERT_EQ(r.error, "") << r.log;
  // What a SIGKILL after iter_0000001's rename and before the first latest file leaves.
  fs::remove(ck + "/" + checkpoint::kLatestFile);

  // checkpoint.load = the iteration folder, saving into its directory: it is the newest, so accepted.
  {
    config::CheckpointConfig c;
    c.save = ck;
    c.load = ck + "/iter_0000001";
    EXPECT_EQ(prepare_checkpoint_dirs(c).resume_from, ck + "/iter_0000001");
  }
  // checkpoint.load = the directory resolves to its newest iteration folder, said in the log, and the run
  // continues bit for bit.
  r = run(with({"checkpoint.save=" + ck, "checkpoint.load=" + ck}), dir / "run");
  ASSERT_EQ(r.error, "") << r.log;
  EXPECT_NE(r.log.find("checkpoint.load " + ck + " has no " + checkpoint::kLatestFile +
                       " (a save was interrupted before writing it): resuming its newest iteration folder, " + ck +
                       "/iter_0000001"),
            std::string::npos)
      << r.log;
  EXPECT_EQ(r.summary.start_step, 1);
  EXPECT_TRUE(read_file(ck + "/iter_0000003/model.safetensors") == read_file(full + "/iter_0000003/model.safetensors"));
  EXPECT_TRUE(read_file(ck + "/iter_0000003/optimizer_exp_avg_sq.safetensors") ==
              read_file(full + "/iter_0000003/optimizer_exp_avg_sq.safetensors"));
}

TEST(TrainerResume, ALatestFileNamingAMissingIterationListsThoseThere) {
  Scratch dir("latest_missing");
  const std::string ck = dir / "ck";
  RunOutcome r = run(tiny({"train.train_iters=2", "checkpoint.save=" + ck}), dir / "run");
  ASSERT_EQ(r.error, "") << r.log;
  std::ofstream(ck + "/" + checkpoint::kLatestFile, std::ios::trunc) << "9\n";
  // checkpoint.auto_resume found it, not checkpoint.load: the message names what the user set.
  r = run(tiny({"train.train_iters=4", "checkpoint.save=" + ck, "checkpoint.auto_resume=true"}), dir / "run");
  EXPECT_EQ(r.error.rfind("checkpoint.auto_resume (checkpoint.save) " + ck + ": " + checkpoint::kLatestFile +
                              " names iteration 9 but " + ck + "/iter_0000009 is missing",
                          0),
            0u)
      << r.error;
  EXPECT_NE(r.error.find(ck + " holds iter_0000002"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("write 2 into " + ck + "/" + checkpoint::kLatestFile), std::string::npos) << r.error;
}

TEST(TrainerResume, AMissingOrUnreadableTrainStateNamesTheIterationBefore) {
  Scratch dir("state");
  const std::string ck = dir / "ck";
  RunOutcome r = run(tiny({"train.train_iters=4", "checkpoint.save=" + ck, "checkpoint.save_interval=2"}), dir / "run");
  ASSERT_EQ(r.error, "") << r.log;
  const config::Config c = tiny({});
  const model::ModelLayout layout = model::model_layout(config::model_spec(c));
  const std::string state = ck + "/iter_0000004/train_state.json";
  const std::string advice = "set checkpoint.load=" + ck + "/iter_0000002 and checkpoint.save to another directory";
  std::ofstream(state, std::ios::trunc) << "{\"format\": ";
  std::string e = error_of([&] { load_checkpoint(ck, c, layout); });
  EXPECT_NE(e.find("is not valid JSON"), std::string::npos) << e;
  EXPECT_NE(e.find(advice), std::string::npos) << e;
  fs::remove(state);
  e = error_of([&] { load_checkpoint(ck, c, layout); });
  EXPECT_NE(e.find(state), std::string::npos) << e;
  EXPECT_NE(e.find(advice), std::string::npos) << e;
}

// ---- 3, 6. records cut back on a resume are kept; a damaged line is named as one ----

TEST(TrainerResume, RecordsPastTheCheckpointAreKeptAndADamagedLineIsNamed) {
  Scratch dir("records");
  const std::string run_dir = dir / "run";
  fs::create_directories(run_dir);
  std::ofstream(run_dir + "/config.yaml") << "train: {train_iters: 6}\n";
  std::ofstream(run_dir + "/report.html") << "<html>first</html>\n";
  std::ofstream(run_dir + "/run.json") << "{\"run_id\": \"a\"}\n";
  const auto write_metrics = [&](int last, const std::string& tail) {
    std::ofstream out(run_dir + "/metrics.jsonl", std::ios::trunc);
    for (int step = 1; step <= last; ++step) out << "{\"step\": " << step << ", \"loss\": 1}\n";
    out << tail;
  };
  // A full disk cut step 4's record short; the checkpoint is at step 4.
  write_metrics(3, "{\"step\": 4, \"lo");
  RecordsCut cut = cut_records_after(run_dir, 4);
  EXPECT_EQ(cut.records_after, 0u);
  EXPECT_EQ(cut.damaged_lines, 1u);
  EXPECT_FALSE(cut.step_recorded);
  EXPECT_FALSE(cut.kept_in.has_value());
  testing::internal::CaptureStderr();
  log_records_cut(cut, run_dir, 4);
  std::string log = testing::internal::GetCapturedStderr();
  EXPECT_NE(log.find("dropped a line that was no whole record"), std::string::npos) << log;
  EXPECT_NE(log.find("has no record of step 4, the checkpoint's step"), std::string::npos) << log;
  EXPECT_EQ(log.find("past the checkpoint"), std::string::npos) << "not a run that went further:\n" << log;
  EXPECT_EQ(read_file(run_dir + "/metrics.jsonl"),
            "{\"step\": 1, \"loss\": 1}\n{\"step\": 2, \"loss\": 1}\n{\"step\": 3, \"loss\": 1}\n");
  EXPECT_FALSE(fs::exists(run_dir + "/previous"));

  // A run that went on to step 6 resumed from step 4: steps 5-6 move to previous/run-1, with the files the
  // resumed run replaces; nothing is deleted.
  write_metrics(6, "");
  cut = cut_records_after(run_dir, 4);
  EXPECT_EQ(cut.records_after, 2u);
  EXPECT_EQ(cut.last_step, 6);
  EXPECT_TRUE(cut.step_recorded);
  ASSERT_TRUE(cut.kept_in.has_value());
  EXPECT_EQ(*cut.kept_in, run_dir + "/previous/run-1");
  EXPECT_EQ(read_file(*cut.kept_in + "/metrics.jsonl"), "{\"step\": 5, \"loss\": 1}\n{\"step\": 6, \"loss\": 1}\n");
  EXPECT_EQ(read_file(*cut.kept_in + "/config.yaml"), "train: {train_iters: 6}\n");
  EXPECT_EQ(read_file(*cut.kept_in + "/report.html"), "<html>first</html>\n");
  EXPECT_FALSE(fs::exists(*cut.kept_in + "/run.json")) << "a resume must never bring these back as a run";
  EXPECT_EQ(read_file(run_dir + "/metrics.jsonl").find("\"step\": 5"), std::string::npos);
  testing::internal::CaptureStderr();
  log_records_cut(cut, run_dir, 4);
  log = testing::internal::GetCapturedStderr();
  EXPECT_NE(log.find("went on to step 6, past the checkpoint's step 4"), std::string::npos) << log;
  EXPECT_NE(log.find("moved its 2 records after step 4"), std::string::npos) << log;
  EXPECT_NE(log.find(run_dir + "/previous/run-1"), std::string::npos) << log;
}

// A branch from an older checkpoint into the run's own folder: the later records were deleted.
TEST(TrainerResume, ABranchIntoTheSameRunFolderKeepsTheOriginalRecords) {
  Scratch dir("branch");
  const std::string ck = dir / "ck", run_dir = dir / "run";
  RunOutcome r = run(tiny({"train.train_iters=6", "checkpoint.save=" + ck, "checkpoint.save_interval=3"}), run_dir);
  ASSERT_EQ(r.error, "") << r.log;
  const std::string original = read_file(run_dir + "/metrics.jsonl");
  r = run(tiny({"train.train_iters=6", "optimizer.lr=1e-3", "checkpoint.load=" + ck + "/iter_0000003",
                "checkpoint.save=" + (dir / "branch_ck")}),
          run_dir);
  ASSERT_EQ(r.error, "") << r.log;
  // The original's lines of steps 4-6 are in previous/run-1, byte for byte.
  const std::string kept = read_file(run_dir + "/previous/run-1/metrics.jsonl");
  ASSERT_FALSE(kept.empty()) << r.log;
  EXPECT_EQ(original.substr(original.size() - kept.size()), kept);
  EXPECT_EQ(kept.rfind("{\"step\": 4,", 0), 0u) << kept;
  EXPECT_NE(read_file(run_dir + "/previous/run-1/config.yaml").find("lr: 0.0003"), std::string::npos);
}

// ---- 5, 7. stops: no stale validation loss, what was saved, and a signal at the end ----

TEST(TrainerResume, AStoppedRunSaysWhichStepItsValidationLossIsFromAndHowToContinue) {
  Scratch dir("stop");
  const std::string ck = dir / "ck";
  const RunOutcome r = run(tiny({"train.train_iters=10", "train.eval_interval=2", "train.eval_iters=1",
                                 "checkpoint.save=" + ck, "checkpoint.save_interval=3"}),
                           dir / "run", /*stop_after_save=*/3);
  ASSERT_EQ(r.error, "") << r.log;
  EXPECT_TRUE(r.summary.stopped_by_signal);
  EXPECT_EQ(r.summary.steps_done, 3);
  // The last evaluation was after step 2: not presented as the run's (cmd_train prints a finite one).
  EXPECT_TRUE(std::isnan(r.summary.last_val_loss)) << r.summary.last_val_loss;
  EXPECT_NE(r.log.find("the last validation loss, "), std::string::npos) << r.log;
  EXPECT_NE(r.log.find(", is from step 2"), std::string::npos) << r.log;
  EXPECT_NE(r.log.find("interrupted by SIGTERM after step 3 of 10"), std::string::npos) << r.log;
  // How to go on: said once, in the last line (cmd_train prints run_summary_line, which ends with this note).
  EXPECT_NE(r.summary.end_note.find("saved " + ck + "/iter_0000003: to continue, run the same command with "
                                    "checkpoint.load=" + ck),
            std::string::npos)
      << r.summary.end_note;
  EXPECT_EQ(r.log.find("to continue"), std::string::npos) << "said twice:\n" << r.log;
}

TEST(TrainerResume, AStopWithoutCheckpointSaveSaysNothingWasSaved) {
  config::Config c = tiny({});
  TrainSummary stopped;
  stopped.start_step = 0;
  stopped.steps_done = 5;
  stopped.train_iters = 8;
  stopped.stopped_by_signal = true;
  stopped.stop_signal = SIGINT;
  std::string text = run_end_note(c, stopped);
  EXPECT_NE(text.find("nothing was saved (checkpoint.save is not set): a new run starts again from step 0"),
            std::string::npos)
      << text;
  EXPECT_EQ(stopped_run_summary(SIGINT, 5, 8), "interrupted by SIGINT after step 5 of 8");
  c.checkpoint.save = "/ck";
  c.checkpoint.load = "/ck";
  stopped.start_step = 2;
  text = run_end_note(c, stopped);
  EXPECT_NE(text.find("saved /ck/iter_0000005: to continue, run the same command again"), std::string::npos) << text;
}

TEST(TrainerResume, ASignalDuringTheLastSaveIsNoInterruption) {
  Scratch dir("end");
  const RunOutcome r =
      run(tiny({"train.train_iters=4", "checkpoint.save=" + (dir / "ck"), "checkpoint.save_interval=2"}), dir / "run",
          /*stop_after_save=*/4);
  ASSERT_EQ(r.error, "") << r.log;
  EXPECT_FALSE(r.summary.stopped_by_signal) << "exit 0: every step is done and saved";
  EXPECT_EQ(r.summary.steps_done, 4);
  EXPECT_NE(r.log.find("SIGTERM arrived during the last step or its save: the run completed them"), std::string::npos)
      << r.log;
  EXPECT_EQ(r.log.find("interrupted"), std::string::npos) << r.log;
  EXPECT_NE(read_file(dir / "run/report.html").find("finished: step 4 of 4 (SIGTERM arrived at the end)"),
            std::string::npos);
}

// ---- 7. a refused non-finite save says what stays saved ----

// A Megatron-Bridge key accepted without effect (config/bridge_inert_keys.h) added or dropped between a run and its
// resume changes nothing the training computes: no "different configuration" warning. A real change still warns.
TEST(TrainerResume, BridgeKeysWithoutEffectDoNotChangeTheResumedConfiguration) {
  Scratch dir("inert");
  const std::string ck = dir / "ck";
  ASSERT_EQ(run(tiny({"train.train_iters=2", "checkpoint.save=" + ck}), dir / "run").error, "");
  const RunOutcome same =
      run(tiny({"train.train_iters=3", "checkpoint.save=" + ck, "checkpoint.load=" + ck, "model.moe_grouped_gemm=true",
                "logger.wandb_project=p", "train.manual_gc=true", "optimizer.main_grads_dtype=torch.float32",
                "dataset.num_workers=8", "ddp.overlap_param_gather=true", "optimizer.exp_avg_dtype=torch.float32"}),
          dir / "run");
  ASSERT_EQ(same.error, "") << same.log;
  EXPECT_EQ(same.log.find("different configuration"), std::string::npos) << same.log;
  const RunOutcome changed = run(tiny({"train.train_iters=4", "checkpoint.save=" + ck, "checkpoint.load=" + ck,
                                       "model.moe_grouped_gemm=true", "optimizer.lr=1e-3"}),
                                 dir / "run");
  ASSERT_EQ(changed.error, "") << changed.log;
  EXPECT_NE(changed.log.find("different configuration"), std::string::npos) << changed.log;
}

// model.is_hybrid_model changes the initial weights (it was a Bridge key without effect): a resume with it flipped is
// a changed configuration, either way, and the same value is none.
TEST(TrainerResume, FlippingIsHybridModelChangesTheResumedConfiguration) {
  Scratch dir("is_hybrid");
  const std::string ck = dir / "ck";
  ASSERT_EQ(run(tiny({"train.train_iters=2", "checkpoint.save=" + ck}), dir / "run").error, "");
  const RunOutcome flipped =
      run(tiny({"train.train_iters=3", "checkpoint.save=" + ck, "checkpoint.load=" + ck, "model.is_hybrid_model=true"}),
          dir / "run");
  ASSERT_EQ(flipped.error, "") << flipped.log;
  EXPECT_NE(flipped.log.find("saved with a different configuration"), std::string::npos) << flipped.log;
  const RunOutcome same =
      run(tiny({"train.train_iters=4", "checkpoint.save=" + ck, "checkpoint.load=" + ck, "model.is_hybrid_model=true"}),
          dir / "run");
  ASSERT_EQ(same.error, "") << same.log;
  EXPECT_EQ(same.log.find("different configuration"), std::string::npos) << same.log;
  const RunOutcome back =
      run(tiny({"train.train_iters=5", "checkpoint.save=" + ck, "checkpoint.load=" + ck}), dir / "run");
  ASSERT_EQ(back.error, "") << back.log;
  EXPECT_NE(back.log.find("saved with a different configuration"), std::string::npos) << back.log;
}

TEST(TrainerResume, ARefusedNonFiniteSaveSaysWhatStaysSaved) {
  Scratch dir("nonfinite");
  const config::Config base = tiny({});
  const model::ModelLayout layout = model::model_layout(config::model_spec(base));
  TrainingState s;
  s.steps_done = 5;
  s.main_weights.assign(static_cast<size_t>(layout.total()), std::numeric_limits<float>::quiet_NaN());
  s.exp_avg = s.exp_avg_sq = s.main_weights;
  const auto message = [&](const std::optional<std::string>& save) {
    config::Config c = base;
    c.checkpoint.save = save;
    return error_of([&] { check_state_finite(s, layout, c); });
  };
  std::string e = message(std::nullopt);
  EXPECT_NE(e.find("Nothing was saved (checkpoint.save is not set)."), std::string::npos) << e;
  EXPECT_EQ(e.find("stays"), std::string::npos) << e;
  fs::create_directories(dir / "empty");
  e = message(dir / "empty");
  EXPECT_NE(e.find("Nothing was saved: " + (dir / "empty") + " holds no checkpoint."), std::string::npos) << e;
  fs::create_directories(dir / "ck");
  std::ofstream(dir / "ck/latest_checkpointed_iteration.txt") << "3\n";
  e = message(dir / "ck");
  EXPECT_NE(e.find("still names iteration 3, the last checkpoint saved there"), std::string::npos) << e;
}

}  // namespace
}  // namespace sg::train
