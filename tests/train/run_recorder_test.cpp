// train/run_recorder, in process on the CPU backend: a resumed run whose configuration changed keeps the run
// folder's config.yaml in a new previous/run-<k>/ before writing its own (the earlier steps' records ran with
// it), and says where in one line; a resume that changes only how it continues (checkpoint.load) keeps none; a
// resume that cut records kept it with them, once; TensorBoard shows each step once after a resume, a branch or a
// fresh run into the same folder (each run's session start); a resumed run that ends before its first step reports
// its checkpoint's step. Each case failed before its fix.
#include "train/run_recorder.h"

#include <gtest/gtest.h>
#include <signal.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "config/checkpoint_overrides.h"
#include "config/config.h"
#include "config/validate.h"
#include "core/strings.h"
#include "graph/registry.h"
#include "test_dir.h"
#include "train/run_folder.h"
#include "train/tensorboard_event.pb.h"
#include "train/trainer.h"

namespace sg::train {
namespace {

namespace fs = std::filesystem;

using test::read_file;

class RunRecorderResume : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = sg::test::fresh_test_dir("run_recorder_test", fs::current_path()); }
  void TearDown() override {
    graph::clear_stop_request();
    if (!HasFailure()) fs::remove_all(dir_);
  }

  // A one-layer model the CPU trains in milliseconds a step, on mock data, saving into ck/ every 2 steps.
  config::Config tiny(const std::vector<std::string>& extra) const {
    std::vector<std::string> o = {"model.num_layers=1",          "model.hidden_size=64",
                                  "model.ffn_hidden_size=128",   "model.num_attention_heads=2",
                                  "model.num_query_groups=2",    "model.seq_length=32",
                                  "dataset.seq_length=32",       "model.vocab_size=256",
                                  "train.micro_batch_size=2",    "train.global_batch_size=2",
                                  "scheduler.lr_warmup_iters=1", "train.train_iters=8",
                                  "logger.log_interval=1000",    "checkpoint.save=" + (dir_ / "ck").string(),
                                  "checkpoint.save_interval=2"};
    o.insert(o.end(), extra.begin(), extra.end());
    return config::load_config("llama/tiny", o);
  }

  // Trains `c` in run/, stopped (as by SIGTERM) right after the save of `stop_after_save`; returns the log.
  std::string run(const config::Config& c, int64_t stop_after_save) {
    TrainOptions options;
    options.run_dir = run_dir();
    options.force_cpu = true;
    options.on_saved = [stop_after_save](int64_t step) {
      if (step == stop_after_save) graph::request_stop(SIGTERM);
    };
    graph::clear_stop_request();
    testing::internal::CaptureStderr();
    TrainSummary summary;
    try {
      summary = train(c, options);
    } catch (const std::exception& e) {
      ADD_FAILURE() << e.what();
    }
    graph::clear_stop_request();
    const std::string log = testing::internal::GetCapturedStderr();
    EXPECT_EQ(summary.steps_done, stop_after_save) << log;
    return log;
  }

  std::string run_dir() const { return (dir_ / "run").string(); }
  fs::path dir_;
};

TEST_F(RunRecorderResume, AChangedConfigurationKeepsTheOneTheEarlierStepsRanWith) {
  const std::string load = "checkpoint.load=" + (dir_ / "ck").string();
  std::string log = run(tiny({}), 2);
  const std::string first = read_file(run_dir() + "/config.yaml");

  // Resumed with checkpoint.load: how it continues, not what it trains. The config stays one; nothing kept.
  log = run(tiny({load}), 4);
  EXPECT_FALSE(fs::exists(run_dir() + "/previous")) << log;
  EXPECT_EQ(log.find("configuration changed"), std::string::npos) << log;
  const std::string second = read_file(run_dir() + "/config.yaml");
  EXPECT_NE(second, first);  // checkpoint.load is recorded

  // Resumed with another learning rate: steps 1-4 ran with the earlier config.yaml, which is kept (alone).
  log = run(tiny({load, "optimizer.lr=1e-4"}), 6);
  const fs::path kept = fs::path(run_dir()) / "previous" / "run-1";
  EXPECT_EQ(read_file(kept / "config.yaml"), second) << log;
  EXPECT_FALSE(fs::exists(kept / "metrics.jsonl"));
  EXPECT_FALSE(fs::exists(kept / "run.json")) << "not a run's records: no resume brings it back";
  EXPECT_NE(read_file(run_dir() + "/config.yaml").find("lr: 0.0001"), std::string::npos);
  EXPECT_NE(log.find(run_dir() +
                     "/config.yaml: the configuration changed since the earlier steps of this run; "
                     "kept the one they ran with in " +
                     (kept / "config.yaml").string()),
            std::string::npos)
      << log;
  // The records go on in one file: 1-6.
  EXPECT_NE(read_file(run_dir() + "/metrics.jsonl").find("\"step\": 6"), std::string::npos);
}

TEST_F(RunRecorderResume, ACutThatKeptTheConfigKeepsItOnce) {
  std::string log = run(tiny({}), 4);
  const std::string first = read_file(run_dir() + "/config.yaml");
  // A branch from step 2 with another learning rate: steps 3-4 are cut and kept with the config they ran with.
  log = run(tiny({"checkpoint.load=" + (dir_ / "ck" / "iter_0000002").string(), "optimizer.lr=1e-4",
                  "checkpoint.save=" + (dir_ / "ck2").string()}),
            4);
  const fs::path previous = fs::path(run_dir()) / "previous";
  EXPECT_EQ(read_file(previous / "run-1" / "config.yaml"), first) << log;
  EXPECT_TRUE(fs::exists(previous / "run-1" / "metrics.jsonl")) << log;
  EXPECT_FALSE(fs::exists(previous / "run-2")) << "kept twice:\n" << log;
}

// TensorBoard's reading of a folder (its EventAccumulator with purge_orphaned_data, its default): the files in name
// order, and a SessionLog START at step S drops every event read before at a step >= S. Returns tag -> steps.
std::map<std::string, std::vector<int64_t>> tensorboard_view(const fs::path& dir) {
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir)) files.push_back(e.path());
  std::sort(files.begin(), files.end());
  std::map<std::string, std::vector<int64_t>> steps;
  for (const fs::path& file : files) {
    const std::string bytes = read_file(file);
    for (size_t pos = 0; pos + 16 <= bytes.size();) {
      uint64_t length = 0;
      std::memcpy(&length, bytes.data() + pos, 8);
      sg::tensorboard::Event event;
      EXPECT_TRUE(event.ParseFromArray(bytes.data() + pos + 12, static_cast<int>(length))) << file;
      pos += 16 + length;
      if (event.has_session_log() && event.session_log().status() == sg::tensorboard::SessionLog::START) {
        for (auto& [tag, list] : steps) std::erase_if(list, [&](int64_t s) { return s >= event.step(); });
      }
      for (const auto& value : event.summary().value()) steps[value.tag()].push_back(event.step());
    }
  }
  return steps;
}

// A branch from step 4 of a run that reached 6, then a fresh run into the same folders: TensorBoard shows each
// step once (the branch's 5 and 6, then only the fresh run's 1 and 2), not the earlier files' steps beside them.
TEST_F(RunRecorderResume, TensorBoardShowsEachStepOnceAfterABranchAndAFreshRun) {
  const std::string tb = "logger.tensorboard_dir=" + (dir_ / "tb").string();
  run(tiny({tb}), 6);
  run(tiny({tb, "checkpoint.load=" + (dir_ / "ck" / "iter_0000004").string(),
            "checkpoint.save=" + (dir_ / "ck2").string()}),
      6);
  std::map<std::string, std::vector<int64_t>> view = tensorboard_view(dir_ / "tb");
  EXPECT_EQ(view["lm loss"], (std::vector<int64_t>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(view["learning-rate"], (std::vector<int64_t>{1, 2, 3, 4, 5, 6}));
  run(tiny({tb, "checkpoint.save=" + (dir_ / "ck3").string()}), 2);
  view = tensorboard_view(dir_ / "tb");
  EXPECT_EQ(view["lm loss"], (std::vector<int64_t>{1, 2}));
  size_t files = 0;
  for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir_ / "tb")) ++files;
  EXPECT_EQ(files, 3u) << "one file a run, none overwritten";
}

// A resumed run that ends before its first step (an error, a stop) reports the checkpoint's step, not step 0.
TEST_F(RunRecorderResume, AResumedRunEndingBeforeItsFirstStepReportsTheCheckpointsStep) {
  { RunRecorder recorder(tiny({}), run_dir(), {.resumed = true, .start_step = 4}, "run-id", RunReportInfo{}); }
  const std::string html = read_file(run_dir() + "/report.html");
  EXPECT_NE(html.find("ended early, after step 4"), std::string::npos) << html;
}

// config.yaml's header tells how to rerun the run: from its checkpoints, or over. Each instruction, applied to
// the configuration the file holds (any of the resume keys a run may have been started with), validates, and
// the text names every override.
TEST(StartOverHint, EachInstructionValidatesOnTheConfigurationItIsWrittenInto) {
  const std::string save = ::testing::TempDir() + "sg_start_over_" + std::to_string(::getpid());
  std::filesystem::create_directories(save);
  for (const std::vector<std::string>& run :
       {std::vector<std::string>{}, std::vector<std::string>{"checkpoint.auto_resume=true"},
        std::vector<std::string>{"checkpoint.load=" + save}}) {
    std::vector<std::string> overrides = {"checkpoint.save=" + save};
    overrides.insert(overrides.end(), run.begin(), run.end());
    SCOPED_TRACE(overrides.back());
    const config::Config written = config::load_config("llama/tiny", overrides);
    ASSERT_TRUE(config::validate(written).ok());
    const std::string hint = start_over_hint(written.checkpoint);
    for (const auto& more :
         {config::start_over_overrides(written.checkpoint), config::continue_overrides(written.checkpoint)}) {
      std::vector<std::string> all = overrides;
      all.insert(all.end(), more.begin(), more.end());
      const config::ValidationReport report = config::validate(config::load_config("llama/tiny", all));
      EXPECT_TRUE(report.ok()) << join(more, " ") << "\n" << (report.ok() ? "" : report.violations[0].message);
      for (const auto& key : more) EXPECT_NE(hint.find(key), std::string::npos) << hint;
    }
    const config::Config over = config::load_config("llama/tiny", [&] {
      std::vector<std::string> all = overrides;
      for (const auto& key : config::start_over_overrides(written.checkpoint)) all.push_back(key);
      return all;
    }());
    EXPECT_TRUE(over.checkpoint.overwrite && !over.checkpoint.auto_resume && !over.checkpoint.load) << hint;
  }
  std::filesystem::remove_all(save);
}

}  // namespace
}  // namespace sg::train
