// The trainer's lifecycle pieces in process (issue 17): the ETA after a resume, the stop watchdog's
// grace scaled with save time, the host memory plan and allocation failures, metrics truncation
// and write errors, NaN stops and refused saves (exit 3), what a run does with its checkpoint
// directories, and a stop requested during a periodic save.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "checkpoint/checkpoint_dir.h"
#include "config/config.h"
#include "config/model_config.h"
#include "core/error.h"
#include "graph/registry.h"
#include "model/layer_registry.h"
#include "process_memory.h"
#include "test_dir.h"
#include "test_util.h"
#include "train/host_memory.h"
#include "train/metrics.h"
#include "train/nonfinite_stop.h"
#include "train/progress.h"
#include "train/save_dir_policy.h"
#include "train/stop_grace.h"
#include "train/trainer.h"

namespace sg::train {
namespace {

namespace fs = std::filesystem;

const auto error_of = test::exception_message;

using Scratch = test::ScratchDir;

TEST(Progress, TheEtaAfterAResumeCountsOnlyThisRunsSteps) {
  // Resumed at step 500 of 1000; 10 steps took 10 s: 490 steps left at 1 s each.
  EXPECT_DOUBLE_EQ(Progress::eta_seconds(10.0, 510, 500, 1000), 490.0);
  EXPECT_DOUBLE_EQ(Progress::eta_seconds(10.0, 10, 0, 1000), 990.0);  // a fresh run as before
  EXPECT_LT(Progress::eta_seconds(0.0, 500, 500, 1000), 0.0);         // unknown before a step
}

TEST(StopGrace, ScalesWithTheMeasuredSaveAndStepTimes) {
  EXPECT_DOUBLE_EQ(stop_grace_seconds({.saves = false, .step_seconds = 0.0}), 1.5);
  EXPECT_DOUBLE_EQ(stop_grace_seconds({.saves = false, .step_seconds = 4.0}), 9.5);
  // Small checkpoints keep the 120 s floor; a 400 s save of a large model gets 3x its time.
  EXPECT_DOUBLE_EQ(stop_grace_seconds({.saves = true, .checkpoint_bytes = 1e6, .step_seconds = 1.0}), 120.0);
  EXPECT_DOUBLE_EQ(stop_grace_seconds({.saves = true, .checkpoint_bytes = 1e6, .step_seconds = 5.0, .save_seconds = 400.0}),
                   2 * 5.0 + 3 * 400.0 + 10.0);
  // Before the first save: the checkpoint's size at a slow 50 MB/s (14 B per parameter of 8e9).
  EXPECT_DOUBLE_EQ(stop_grace_seconds({.saves = true, .checkpoint_bytes = 14 * 8e9, .step_seconds = 0.0}),
                   3 * (14 * 8e9 / kSlowWriteBytesPerSecond) + 10.0);
}

TEST(StopGrace, CoversAFirstStepNotYetMeasuredAndAnEvaluationInFlight) {
  // Before the first step is measured (it warms up or captures graphs), not 1.5 s: the watchdog used to
  // end such a run without its report.
  EXPECT_DOUBLE_EQ(stop_grace_seconds({.saves = false}), 1.5 + 2 * kUnmeasuredStepSeconds);
  EXPECT_GE(stop_grace_seconds({.saves = true, .checkpoint_bytes = 1e6}), 2 * kUnmeasuredStepSeconds);
  // An evaluation of 100 batches before the first is measured: a step each, with a margin.
  EXPECT_DOUBLE_EQ(stop_grace_seconds({.saves = false, .step_seconds = 1.0, .eval_batches = 100}),
                   1.5 + 2.0 + 1.5 * 100);
  EXPECT_DOUBLE_EQ(stop_grace_seconds({.saves = false, .step_seconds = 1.0, .eval_batches = 100, .eval_seconds = 10}),
                   1.5 + 2.0 + 1.5 * 10);
  EXPECT_DOUBLE_EQ(stop_grace_seconds({.saves = true,
                                       .checkpoint_bytes = 1e6,
                                       .step_seconds = 1.0,
                                       .save_seconds = 1,
                                       .eval_batches = 1000,
                                       .eval_seconds = 200}),
                   2.0 + 1.5 * 200 + 3.0 + 10.0);
}

model::ModelSpec tiny_spec() {
  model::ModelSpec m;
  m.vocab_size = 256;
  m.num_layers = 2;
  m.hidden_size = 64;
  m.ffn_hidden_size = 128;
  m.num_attention_heads = 4;
  m.num_query_groups = 4;
  m.seq_length = 32;
  return m;
}

TEST(HostMemory, ThePlanCountsTheParametersOfTheLayout) {
  const model::ModelSpec m = tiny_spec();
  model::BatchSpec b;
  b.micro_batch_size = 2;
  b.num_microbatches = 2;
  const HostMemoryPlan cpu = plan_host_memory(m, b, {.cpu_backend = true});
  const double P = static_cast<double>(model::model_layout(m).total());
  ASSERT_GE(cpu.items.size(), 2u);
  EXPECT_DOUBLE_EQ(cpu.items[0].bytes, 2 * 2 * 32 * 12.0);  // the input batch
  EXPECT_DOUBLE_EQ(cpu.items[1].bytes, 16 * P);              // weights, gradients, Adam moments
  const HostMemoryPlan staged = plan_host_memory(m, b, {.cpu_backend = true, .checkpoint_save = true});
  EXPECT_DOUBLE_EQ(staged.total() - cpu.total(), 14 * P);
  // The GPU backend keeps only the batches on the host.
  EXPECT_EQ(plan_host_memory(m, b, {.cpu_backend = false}).items.size(), 1u);
}

TEST(HostMemory, APlanThatDoesNotFitIsRefusedWithItsNumbersAndKeys) {
  model::ModelSpec m = tiny_spec();
  m.num_layers = 100000;
  m.hidden_size = 4096;
  m.ffn_hidden_size = 11008;
  m.num_attention_heads = 32;
  m.num_query_groups = 32;
  model::BatchSpec b;
  const HostMemoryPlan plan = plan_host_memory(m, b, {.cpu_backend = true});
  const std::string e = error_of([&] { check_host_memory(plan, {16e9, "MemAvailable in /proc/meminfo"}); });
  EXPECT_NE(e.find("needs about"), std::string::npos) << e;
  EXPECT_NE(e.find("only 14.90 GiB is available (MemAvailable in /proc/meminfo)"), std::string::npos) << e;
  EXPECT_NE(e.find("largest part is the weights, gradients and Adam moments"), std::string::npos) << e;
  EXPECT_NE(e.find("model.num_layers"), std::string::npos) << e;
  EXPECT_EQ(error_of([&] { check_host_memory(plan_host_memory(tiny_spec(), b, {}), {16e9, "test"}); }), "");
  const AvailableHostMemory here = available_host_memory();
  EXPECT_GT(here.bytes, 0.0);
  EXPECT_FALSE(here.source.empty());
}

TEST(HostMemory, AnAllocationFailureNamesWhatWasAllocated) {
  if (!test::kSanitizedAllocator) {  // a sanitizer's allocator ends the process here
    const std::string e = error_of([] {
      with_host_allocation("the test's giant buffer", [] {
        std::vector<float> v;
        v.reserve(std::numeric_limits<size_t>::max() / 8);  // length_error or bad_alloc, never a buffer
      });
    });
    EXPECT_NE(e.find("the test's giant buffer"), std::string::npos) << e;
  }
  const std::string bad_alloc = error_of([] {
    with_host_allocation("the model", [] { throw std::bad_alloc(); });
  });
  EXPECT_NE(bad_alloc.find("out of host memory while allocating the model"), std::string::npos) << bad_alloc;
}

TEST(Metrics, TruncationKeepsOnlyStepsUpToTheCheckpoint) {
  Scratch dir("metrics_cut");
  const std::string path = dir / "metrics.jsonl";
  {
    std::ofstream out(path);
    for (int step = 1; step <= 8; ++step) out << "{\"step\": " << step << ", \"loss\": 1}\n";
    out << "{\"step\": 9, \"lo";  // a record cut by a crash
  }
  const MetricsTruncation cut = truncate_metrics_after(path, 5);
  EXPECT_EQ(cut.kept, 5u);
  EXPECT_EQ(cut.dropped, 4u);
  std::ifstream in(path);
  std::string line;
  int expected = 1;
  while (std::getline(in, line)) EXPECT_EQ(line, "{\"step\": " + std::to_string(expected++) + ", \"loss\": 1}");
  EXPECT_EQ(expected, 6);
  EXPECT_EQ(truncate_metrics_after(dir / "missing.jsonl", 3).kept, 0u);
  EXPECT_FALSE(fs::exists(dir / "missing.jsonl"));
}

// A file whose last record lost its newline (a full disk cut the write there): records appended by a resumed run
// start on a line of their own, and the earlier record stays readable.
TEST(Metrics, AppendingAfterACutNewlineStartsANewLine) {
  Scratch dir("metrics_newline");
  const std::string path = dir / "metrics.jsonl";
  {
    std::ofstream out(path);
    out << "{\"step\": 1, \"loss\": 1}\n{\"step\": 2, \"loss\": 1}";
  }
  StepMetrics m;
  m.step = 3;
  {
    MetricsLog log(path, /*append=*/true);
    log.write(m);
  }
  {
    MetricsLog log(path, /*append=*/true);  // a file that ends in a newline gets no empty line
    m.step = 4;
    log.write(m);
  }
  std::ifstream in(path);
  std::string line;
  std::vector<int64_t> steps;
  while (std::getline(in, line)) steps.push_back(nlohmann::json::parse(line).at("step").get<int64_t>());
  EXPECT_EQ(steps, (std::vector<int64_t>{1, 2, 3, 4}));
  EXPECT_EQ(truncate_metrics_after(path, 3).kept, 3u);
}

TEST(Metrics, AWriteErrorIsAnError) {
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full";
  MetricsLog log("/dev/full", /*append=*/false);
  StepMetrics m;
  m.step = 7;
  const std::string e = error_of([&] { log.write(m); });
  EXPECT_NE(e.find("cannot write metrics file /dev/full at step 7: No space left on device (the disk is full)"),
            std::string::npos)
      << e;
}

TEST(NonFiniteStop, FlaggedStepsStopWithExit3NamingTheStepAndTheCheck) {
  config::Config c;
  c.rerun_state_machine.check_for_nan_in_loss = true;
  c.ddp.check_for_nan_in_grad = true;
  StepResult r;
  r.step = 7;
  EXPECT_NO_THROW(check_step_finite(r, c, 8));
  r.loss_finite = false;
  try {
    check_step_finite(r, c, 8);
    ADD_FAILURE() << "a NaN loss did not stop the run";
  } catch (const NonFiniteError& e) {
    EXPECT_EQ(e.exit_code(), 3);
    const std::string msg = e.what();
    EXPECT_EQ(msg.rfind("step 7: the loss is NaN or infinite (rerun_state_machine.check_for_nan_in_loss)", 0), 0u) << msg;
    EXPECT_NE(msg.find("found while step 8 ran"), std::string::npos) << msg;
    // Without checkpoint.save there is no checkpoint to resume from: the advice says so.
    EXPECT_NE(msg.find("start the run again (checkpoint.save is not set"), std::string::npos) << msg;
    EXPECT_EQ(msg.find("resume from the last checkpoint"), std::string::npos) << msg;
  }
  c.checkpoint.save = "/ck/run";
  EXPECT_NE(error_of([&] {
              check_step_finite(r, c, 8);
            }).find("resume from the last checkpoint in /ck/run (checkpoint.load=/ck/run)"),
            std::string::npos);
  r.loss_finite = true;
  r.grads_finite = false;
  EXPECT_NE(error_of([&] { check_step_finite(r, c, 7); }).find("(ddp.check_for_nan_in_grad)"), std::string::npos);
  c.ddp.check_for_nan_in_grad = false;
  EXPECT_NO_THROW(check_step_finite(r, c, 7));  // the check is off: the run goes on
}

TEST(NonFiniteStop, ANonFiniteStateIsNeverSaved) {
  const model::ModelLayout layout = model::model_layout(tiny_spec());
  TrainingState s;
  s.steps_done = 12;
  s.main_weights.assign(static_cast<size_t>(layout.total()), 0.5f);
  s.exp_avg = s.main_weights;
  s.exp_avg_sq = s.main_weights;
  config::Config c;
  EXPECT_NO_THROW(check_state_finite(s, layout, c));
  s.exp_avg[static_cast<size_t>(layout.tensors()[1].offset) + 3] = std::numeric_limits<float>::infinity();
  const std::string e = error_of([&] { check_state_finite(s, layout, c); });
  EXPECT_NE(e.find("step 12: not saving a checkpoint: the Adam exp_avg hold non-finite values (tensor " +
                   layout.tensors()[1].name + " element 3 is inf"),
            std::string::npos)
      << e;
}

TEST(NonFiniteStop, TheRefusedSaveNamesOnlyTheChecksThatAreOff) {
  const model::ModelLayout layout = model::model_layout(tiny_spec());
  TrainingState s;
  s.main_weights.assign(static_cast<size_t>(layout.total()), std::numeric_limits<float>::quiet_NaN());
  s.exp_avg = s.exp_avg_sq = s.main_weights;
  config::Config c;
  const auto message = [&](bool loss_check, bool grad_check) {
    c.rerun_state_machine.check_for_nan_in_loss = loss_check;
    c.ddp.check_for_nan_in_grad = grad_check;
    return error_of([&] { check_state_finite(s, layout, c); });
  };
  std::string e = message(false, false);
  EXPECT_NE(e.find("Turn on rerun_state_machine.check_for_nan_in_loss and ddp.check_for_nan_in_grad"),
            std::string::npos)
      << e;
  e = message(true, false);
  EXPECT_NE(e.find("Turn on ddp.check_for_nan_in_grad to stop"), std::string::npos) << e;
  EXPECT_EQ(e.find("check_for_nan_in_loss"), std::string::npos) << "an enabled check named as off: " << e;
  e = message(false, true);
  EXPECT_NE(e.find("Turn on rerun_state_machine.check_for_nan_in_loss to stop"), std::string::npos) << e;
  EXPECT_EQ(e.find("check_for_nan_in_grad"), std::string::npos) << e;
  // Both on: the checks passed, so the update did it; the message says so instead.
  e = message(true, true);
  EXPECT_EQ(e.find("Turn on"), std::string::npos) << e;
  EXPECT_NE(e.find("the optimizer's update made the state non-finite: lower optimizer.lr"), std::string::npos) << e;
  c.optimizer.clip_grad = 0.0;
  EXPECT_NE(message(true, true).find("set optimizer.clip_grad"), std::string::npos);
}

// ---- checkpoint directories ----

// A folder that looks like a save directory holding iterations `its` (latest = the last one).
void fake_checkpoints(const std::string& dir, const std::vector<int64_t>& its) {
  for (const int64_t it : its) {
    const std::string folder = dir + "/" + checkpoint::iteration_dir_name(it);
    fs::create_directories(folder);
    std::ofstream(folder + "/train_state.json") << "{}";
  }
  std::ofstream(dir + "/latest_checkpointed_iteration.txt") << its.back() << "\n";
}

config::CheckpointConfig dirs_config(std::optional<std::string> save, std::optional<std::string> load = {}) {
  config::CheckpointConfig c;
  c.save = std::move(save);
  c.load = std::move(load);
  return c;
}

TEST(CheckpointDirs, AnEmptyOrNewSaveDirectoryStartsFresh) {
  Scratch dir("dirs_fresh");
  CheckpointDirs d = prepare_checkpoint_dirs(dirs_config(dir / "new"));
  EXPECT_TRUE(d.save_lock.held());
  EXPECT_FALSE(d.resume_from.has_value());
  EXPECT_FALSE(may_resume(dirs_config(dir / "new")));
  EXPECT_TRUE(fs::is_directory(dir / "new"));
  d = CheckpointDirs();
  // Bridge's idiom on a first run: load = save, nothing there yet.
  d = prepare_checkpoint_dirs(dirs_config(dir / "new", dir / "new"));
  EXPECT_FALSE(d.resume_from.has_value());
  EXPECT_NE(d.note.find("holds no checkpoint yet"), std::string::npos);
  // Without checkpoint.save nothing is locked: load is used as given.
  d = prepare_checkpoint_dirs(dirs_config({}, dir / "elsewhere"));
  EXPECT_FALSE(d.save_lock.held());
  EXPECT_EQ(d.resume_from, dir / "elsewhere");
  EXPECT_TRUE(may_resume(dirs_config({}, dir / "elsewhere")));
  config::CheckpointConfig auto_without_save = dirs_config({});
  auto_without_save.auto_resume = true;  // auto_resume resumes checkpoint.save: none here
  EXPECT_FALSE(may_resume(auto_without_save));
  EXPECT_FALSE(prepare_checkpoint_dirs(auto_without_save).resume_from.has_value());
}

TEST(CheckpointDirs, AnOccupiedSaveDirectoryIsResumedRefusedOrOverwritten) {
  Scratch dir("dirs_occupied");
  const std::string save = dir / "ckpt";
  fake_checkpoints(save, {5, 10});
  std::string e = error_of([&] { prepare_checkpoint_dirs(dirs_config(save)); });
  EXPECT_NE(e.find("already holds checkpoints (iterations 5, 10 (latest 10))"), std::string::npos) << e;
  for (const char* option : {"checkpoint.load=", "checkpoint.auto_resume=true", "checkpoint.overwrite=true"}) {
    EXPECT_NE(e.find(option), std::string::npos) << option;
  }
  // Resuming another run while saving here would mix two runs.
  e = error_of([&] { prepare_checkpoint_dirs(dirs_config(save, dir / "other")); });
  EXPECT_NE(e.find("checkpoints of another run"), std::string::npos) << e;

  // may_resume (the host memory plan's: every rank loads what is resumed) says so before the folder is read.
  EXPECT_FALSE(may_resume(dirs_config(save)));
  config::CheckpointConfig c = dirs_config(save);
  c.auto_resume = true;
  EXPECT_EQ(prepare_checkpoint_dirs(c).resume_from, save);
  EXPECT_TRUE(may_resume(c));
  EXPECT_TRUE(may_resume(dirs_config(save, save)));
  EXPECT_EQ(prepare_checkpoint_dirs(dirs_config(save, save)).resume_from, save);
  EXPECT_EQ(prepare_checkpoint_dirs(dirs_config(save, save + "/iter_0000010")).resume_from, save + "/iter_0000010");
  e = error_of([&] { prepare_checkpoint_dirs(dirs_config(save, save + "/iter_0000005")); });
  EXPECT_NE(e.find("older iteration"), std::string::npos) << e;

  c = dirs_config(save);
  c.overwrite = true;
  CheckpointDirs d = prepare_checkpoint_dirs(c);
  EXPECT_FALSE(d.resume_from.has_value());
  EXPECT_FALSE(may_resume(c));
  // Nothing is removed before the run's first save (a run refused before it keeps them: trainer_resume_test).
  EXPECT_NE(d.note.find("holds iterations 5, 10 (latest 10); they stay until this run's first save"),
            std::string::npos)
      << d.note;
  EXPECT_EQ(checkpoint::list_iterations(save), (std::vector<int64_t>{5, 10}));
  const std::string removed = remove_overwritten_checkpoints(d);
  EXPECT_NE(removed.find("checkpoint.overwrite: removed iterations 5, 10"), std::string::npos) << removed;
  EXPECT_FALSE(checkpoint::holds_checkpoints(save));
  EXPECT_EQ(remove_overwritten_checkpoints(d), "") << "once";
}

// checkpoint.save = the pretrained folder: the run's latest file would make that folder name the fine-tuned weights
// (to generate, to a later pretrained_checkpoint). Refused before anything is written into it.
TEST(CheckpointDirs, TheSaveDirectoryIsNeverThePretrainedFolder) {
  Scratch dir("dirs_pretrained");
  const std::string hf = dir / "hf";
  fs::create_directories(hf);
  std::ofstream(hf + "/config.json") << "{}";
  for (const std::string& save : {hf, hf + "/", dir / "./hf"}) {
    SCOPED_TRACE(save);
    config::CheckpointConfig c = dirs_config(save, save);
    c.pretrained_checkpoint = hf;
    const std::string e = error_of([&] { prepare_checkpoint_dirs(c); });
    EXPECT_NE(e.find("is checkpoint.pretrained_checkpoint"), std::string::npos) << e;
    EXPECT_NE(e.find("Choose another checkpoint.save"), std::string::npos) << e;
  }
  EXPECT_FALSE(fs::exists(hf + "/" + checkpoint::kLockFile));
  EXPECT_FALSE(checkpoint::holds_checkpoints(hf));
  // checkpoint.overwrite would delete a pretrained iteration inside checkpoint.save.
  const std::string save = dir / "ckpt";
  fake_checkpoints(save, {5});
  config::CheckpointConfig c = dirs_config(save);
  c.overwrite = true;
  c.pretrained_checkpoint = save + "/iter_0000005";
  const std::string e = error_of([&] { prepare_checkpoint_dirs(c); });
  EXPECT_NE(e.find("would delete checkpoint.pretrained_checkpoint"), std::string::npos) << e;
  EXPECT_EQ(checkpoint::list_iterations(save), (std::vector<int64_t>{5}));
  // Saving elsewhere is fine, and the note says where the run starts from.
  c = dirs_config(dir / "ft", dir / "ft");
  c.pretrained_checkpoint = hf;
  const CheckpointDirs d = prepare_checkpoint_dirs(c);
  EXPECT_FALSE(d.resume_from.has_value());
  EXPECT_NE(d.note.find("holds no checkpoint yet: starting from checkpoint.pretrained_checkpoint " + hf),
            std::string::npos)
      << d.note;
  EXPECT_EQ(d.note.find("from scratch"), std::string::npos) << d.note;
}

TEST(CheckpointDirs, ATrailingSlashOnCheckpointLoadIsTheSameFolder) {
  Scratch dir("dirs_slash");
  const std::string save = dir / "ckpt";
  fake_checkpoints(save, {5, 10});
  // The latest iteration, with a slash (or two, or a "."), resumes as without one.
  for (const std::string& load : {save + "/iter_0000010/", save + "/iter_0000010//", save + "/./iter_0000010/."}) {
    SCOPED_TRACE(load);
    EXPECT_EQ(prepare_checkpoint_dirs(dirs_config(save, load)).resume_from, load);
  }
  EXPECT_EQ(prepare_checkpoint_dirs(dirs_config(save + "/", save + "/")).resume_from, save + "/");
  // An older one is refused as without the slash, also with checkpoint.overwrite, and nothing is removed
  // (the slash once made overwrite delete every checkpoint, the one to load included).
  config::CheckpointConfig c = dirs_config(save, save + "/iter_0000005/");
  std::string e = error_of([&] { prepare_checkpoint_dirs(c); });
  EXPECT_NE(e.find("older iteration"), std::string::npos) << e;
  c.overwrite = true;
  e = error_of([&] { prepare_checkpoint_dirs(c); });
  EXPECT_NE(e.find("older iteration"), std::string::npos) << e;
  EXPECT_EQ(checkpoint::list_iterations(save), (std::vector<int64_t>{5, 10}));
  // Any other path inside checkpoint.save is never wiped by checkpoint.overwrite either.
  fs::create_directories(save + "/iter_0000010/nested");
  c = dirs_config(save, save + "/iter_0000010/nested/");
  c.overwrite = true;
  e = error_of([&] { prepare_checkpoint_dirs(c); });
  EXPECT_NE(e.find("checkpoint.overwrite=true would delete checkpoint.load"), std::string::npos) << e;
  EXPECT_EQ(checkpoint::list_iterations(save), (std::vector<int64_t>{5, 10}));
}

TEST(CheckpointDirs, CheckpointLoadOfAFileSaysItIsAFile) {
  Scratch dir("dirs_file");
  fake_checkpoints(dir / "ckpt", {3});
  std::string e = error_of([&] { checkpoint::resolve_checkpoint(dir / "ckpt/latest_checkpointed_iteration.txt"); });
  EXPECT_NE(e.find("is a file, not a checkpoint folder"), std::string::npos) << e;
  e = error_of([&] { checkpoint::resolve_checkpoint(dir / "missing"); });
  EXPECT_NE(e.find("no such directory"), std::string::npos) << e;
  // A trailing slash is dropped: the folder's name is the iteration its train_state.json is checked against.
  EXPECT_EQ(checkpoint::resolve_checkpoint(dir / "ckpt/iter_0000003/"), dir / "ckpt/iter_0000003");
}

// ---- a stop requested during a periodic save ----

config::Config tiny_run(const std::string& save, int64_t iters) {
  return config::load_config(
      "llama/tiny",
      {"model.num_layers=1", "model.hidden_size=64", "model.ffn_hidden_size=128", "model.num_attention_heads=2",
       "model.num_query_groups=2", "model.seq_length=32", "dataset.seq_length=32", "model.vocab_size=256",
       "train.micro_batch_size=2", "train.global_batch_size=2", "scheduler.lr_warmup_iters=1",
       "train.train_iters=" + std::to_string(iters), "checkpoint.save=" + save, "checkpoint.save_interval=2"});
}

TEST(TrainerStop, ASignalDuringAPeriodicSaveEndsTheRunRightAfterIt) {
  Scratch dir("stop_in_save");
  TrainOptions options;
  options.run_dir = dir / "run";
  options.force_cpu = true;
  std::vector<int64_t> saves;
  options.on_saved = [&](int64_t step) {
    saves.push_back(step);
    if (step == 2) graph::request_stop(SIGTERM);  // arrives while the save of step 2 is under way
  };
  graph::clear_stop_request();
  const TrainSummary summary = train(tiny_run(dir / "ckpt", 10), options);
  graph::clear_stop_request();
  EXPECT_TRUE(summary.stopped_by_signal);
  EXPECT_EQ(summary.steps_done, 2) << "no further step after the save the signal arrived in";
  EXPECT_EQ(saves, std::vector<int64_t>{2}) << "one save, not a second one a step later";
  EXPECT_EQ(checkpoint::read_latest_iteration(dir / "ckpt"), 2);
}

}  // namespace
}  // namespace sg::train
