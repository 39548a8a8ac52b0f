// Issue 17, item 1 on the GPU: a NaN/Inf stops the run in every CUDA-graph mode — eager, the whole
// step as one graph (local full_iteration, which Megatron refuses to check) and per-layer graphs
// (transformer_engine) — within two steps, naming the step and the check, with exit status 3; the
// device flags come back with the lagged metrics. No saved iteration ever holds a non-finite value,
// with the checks on or off.
//   stepgraph_gpu_tests --gtest_filter='NanStopGpu.*'
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <regex>
#include <string>
#include <vector>

#include "checkpoint/checkpoint_dir.h"
#include "checkpoint/finite_check.h"
#include "checkpoint/safetensors.h"
#include "config/config.h"
#include "config/validate.h"
#include "cuda/device.h"
#include "train/nonfinite_stop.h"
#include "train/trainer.h"

namespace sg::train {
namespace {

namespace fs = std::filesystem;

struct Mode {
  const char* name;
  std::vector<std::string> overrides;
};

// Warmup 0: step 1 captures, so the NaN of step 2 comes out of a replayed graph.
const Mode kModes[] = {
    {"none", {"model.cuda_graph_impl=none"}},
    {"local full_iteration", {"model.cuda_graph_impl=local", "model.cuda_graph_scope=full_iteration",
                              "model.cuda_graph_warmup_steps=0"}},
    {"transformer_engine attn,mlp", {"model.cuda_graph_impl=transformer_engine", "model.cuda_graph_scope=attn,mlp",
                                     "model.cuda_graph_warmup_steps=0"}},
};

int64_t metrics_lines(const std::string& run_dir) {
  std::ifstream in(run_dir + "/metrics.jsonl");
  int64_t n = 0;
  for (std::string line; std::getline(in, line);) n += line.empty() ? 0 : 1;
  return n;
}

void expect_saved_iterations_finite(const std::string& dir) {
  for (const int64_t it : checkpoint::list_iterations(dir)) {
    const fs::path folder = fs::path(dir) / checkpoint::iteration_dir_name(it);
    for (const char* file : {checkpoint::kModelFile, checkpoint::kOptimizerMainParamsFile,
                             checkpoint::kOptimizerExpAvgFile, checkpoint::kOptimizerExpAvgSqFile}) {
      const auto bad = checkpoint::find_nonfinite(checkpoint::SafetensorsFile((folder / file).string()));
      EXPECT_FALSE(bad.has_value()) << (folder / file) << ": " << (bad ? describe(*bad) : "");
    }
  }
}

struct Stopped {
  int exit_code = 0;
  std::string message;
  int64_t logged = 0;  // steps in metrics.jsonl
  std::string save_dir;
};

// lr = 1e30 with a checkpoint after every step: step 1 is finite, the update blows the weights up.
Stopped run_to_nan(const Mode& mode, const std::vector<std::string>& checks, const std::string& tag) {
  std::vector<std::string> overrides = mode.overrides;
  overrides.insert(overrides.end(), checks.begin(), checks.end());
  const std::string root = ::testing::TempDir() + "/nan_stop_gpu_" + tag;
  fs::remove_all(root);
  Stopped s;
  s.save_dir = root + "/ckpt";
  overrides.insert(overrides.end(), {"optimizer.lr=1e30", "scheduler.lr_warmup_iters=0", "train.train_iters=8",
                                     "dataset.mock=true", "checkpoint.save=" + s.save_dir,
                                     "checkpoint.save_interval=1"});
  const config::ValidationReport report = config::validate(config::load_config("llama/tiny", overrides));
  EXPECT_TRUE(report.ok()) << (report.violations.empty() ? "" : config::format_violation(report.violations[0]));
  TrainOptions options;
  options.run_dir = root + "/run";
  try {
    train(report.config, options);
    ADD_FAILURE() << mode.name << ": training with lr=1e30 did not stop";
  } catch (const ReportedError& e) {
    s.exit_code = e.exit_code();
    s.message = e.what();
  }
  s.logged = metrics_lines(options.run_dir);
  return s;
}

class NanStopGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda::device_count() == 0) GTEST_SKIP() << "no GPU";
  }
};

TEST_F(NanStopGpu, EveryGraphModeStopsWithinTwoStepsAndSavesNothingNonFinite) {
  int run = 0;
  for (const Mode& mode : kModes) {
    for (const auto& [checks, named] :
         std::vector<std::pair<std::vector<std::string>, std::string>>{
             {{"rerun_state_machine.check_for_nan_in_loss=true", "ddp.check_for_nan_in_grad=false"},
              "rerun_state_machine.check_for_nan_in_loss"},
             {{"rerun_state_machine.check_for_nan_in_loss=false", "ddp.check_for_nan_in_grad=true"},
              "ddp.check_for_nan_in_grad"}}) {
      SCOPED_TRACE(std::string(mode.name) + ", " + named);
      const Stopped s = run_to_nan(mode, checks, std::to_string(run++));
      EXPECT_EQ(s.exit_code, kExitNonFinite) << s.message;
      EXPECT_GE(s.logged, 1) << "step 1 (before the blow-up) is finite";
      // The named step is the first one metrics.jsonl lacks, and the run noticed it at most one step
      // later (the GPU reads each step's flags while the next one runs).
      // With the loss check alone, a step whose loss is still finite can leave non-finite weights (its
      // gradients were not): then the save of that step is what refuses, naming the step it logged.
      const bool refused_save = s.message.find("not saving a checkpoint") != std::string::npos;
      const int64_t bad = refused_save ? s.logged : s.logged + 1;
      EXPECT_EQ(s.message.rfind("step " + std::to_string(bad) + ":", 0), 0u) << s.message;
      if (!refused_save) {
        EXPECT_NE(s.message.find(named), std::string::npos) << s.message;
      }
      std::smatch m;
      if (std::regex_search(s.message, m, std::regex("found while step ([0-9]+) ran"))) {
        EXPECT_LE(std::stoll(m[1]), bad + 1) << s.message;
      }
      // Saved after every finished step with a finite state, never the bad one.
      EXPECT_EQ(checkpoint::read_latest_iteration(s.save_dir), bad - 1);
      expect_saved_iterations_finite(s.save_dir);
    }
  }
}

TEST_F(NanStopGpu, WithTheChecksOffTheSaveOfANonFiniteStateIsRefused) {
  int run = 100;
  for (const Mode& mode : kModes) {
    SCOPED_TRACE(mode.name);
    const Stopped s = run_to_nan(
        mode, {"rerun_state_machine.check_for_nan_in_loss=false", "ddp.check_for_nan_in_grad=false"},
        std::to_string(run++));
    EXPECT_EQ(s.exit_code, kExitNonFinite) << s.message;
    EXPECT_NE(s.message.find("not saving a checkpoint"), std::string::npos) << s.message;
    expect_saved_iterations_finite(s.save_dir);
  }
}

}  // namespace
}  // namespace sg::train
