// validation.skip_train on the CPU backend, in process: the checkpoint a run saved is evaluated to the training
// run's own validation loss at that step, bit for bit, from checkpoint.load, from checkpoint.save with auto_resume
// and from checkpoint.pretrained_checkpoint; nothing is trained, saved or written but the result file; the initial
// weights are evaluated only when nothing names a checkpoint, and a checkpoint.save that holds checkpoints nothing
// loads is refused. validation.start_eval_at_iter holds evaluations back during training, not after the last step.
#include "train/evaluate_only.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "config/config.h"
#include "core/error.h"
#include "cpu_training_runs.h"
#include "test_dir.h"
#include "test_util.h"
#include "train/trainer.h"

namespace sg::train {
namespace {

namespace fs = std::filesystem;

using test::read_jsonl;

std::vector<std::string> iteration_folders(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().filename().string().rfind("iter_", 0) == 0) out.push_back(e.path().filename().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

class EvaluateOnly : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = sg::test::fresh_test_dir("evaluate_only_test", fs::current_path()); }
  void TearDown() override {
    if (!HasFailure()) fs::remove_all(dir_);
  }

  TrainSummary run(const std::string& run_dir, std::vector<std::string> overrides) {
    TrainOptions options;
    options.run_dir = (dir_ / run_dir).string();
    options.force_cpu = true;
    // Dropout on (off in evaluation), 4 steps, 3 validation batches.
    overrides.insert(overrides.begin(), {"model.hidden_dropout=0.1", "train.train_iters=4", "validation.eval_iters=3",
                                         "optimizer.lr=3e-3"});
    return train(test::one_layer_cpu_config(overrides), options);
  }

  // Trains 4 steps with an evaluation every 2, saving at 2 and 4: the validation losses by step.
  std::map<int64_t, double> train_and_save() {
    run("run", {"validation.eval_interval=2", "checkpoint.save=" + ck(), "checkpoint.save_interval=2"});
    std::map<int64_t, double> out;
    for (const auto& j : read_jsonl(dir_ / "run" / "metrics.jsonl")) {
      if (j.contains("val_loss")) out[j["step"].get<int64_t>()] = j["val_loss"].get<double>();
    }
    return out;
  }

  nlohmann::json result(const TrainSummary& s) {
    EXPECT_FALSE(s.evaluation_path.empty());
    return nlohmann::json::parse(test::read_file(s.evaluation_path));
  }

  std::string ck() const { return (dir_ / "ck").string(); }
  fs::path dir_;
};

using test::printed_as_metrics;

TEST_F(EvaluateOnly, TheLoadedCheckpointGetsTheTrainingRunsValidationLossAndNothingElseIsWritten) {
  const std::map<int64_t, double> trained = train_and_save();
  ASSERT_EQ(trained.size(), 2u);
  const std::string metrics = test::read_file((dir_ / "run" / "metrics.jsonl").string());
  const std::string config_yaml = test::read_file((dir_ / "run" / "config.yaml").string());

  // Into the training run's own folder, as a user would: its records stay as they were.
  const TrainSummary s = run("run", {"validation.skip_train=true", "checkpoint.load=" + ck(), "checkpoint.save=" + ck(),
                                     "train.train_iters=1000"});
  EXPECT_EQ(s.steps_run(), 0);
  EXPECT_EQ(s.start_step, 4);
  EXPECT_EQ(s.evaluation_path, (dir_ / "run" / "evaluations" / "iter_0000004.json").string());
  const nlohmann::json r = result(s);
  EXPECT_EQ(r["iteration"], 4);
  EXPECT_EQ(r["weights"], ck() + "/iter_0000004");
  EXPECT_EQ(printed_as_metrics(r["val_loss"].get<double>()), printed_as_metrics(trained.at(4)));
  EXPECT_DOUBLE_EQ(r["val_ppl"].get<double>(), std::exp(r["val_loss"].get<double>()));
  EXPECT_EQ(r["batches"], 3);
  EXPECT_EQ(r["tokens"], 3 * 2 * 32);  // global batches of 2 sequences of 32 tokens
  EXPECT_EQ(r["graphed"], false);
  EXPECT_NE(r["validation_data"].get<std::string>().find("mock"), std::string::npos);
  EXPECT_EQ(test::read_file((dir_ / "run" / "metrics.jsonl").string()), metrics);
  EXPECT_EQ(test::read_file((dir_ / "run" / "config.yaml").string()), config_yaml);
  EXPECT_EQ(iteration_folders(ck()), (std::vector<std::string>{"iter_0000002", "iter_0000004"}));

  // An earlier iteration folder, by its path.
  const TrainSummary at2 = run("eval2", {"validation.skip_train=true", "checkpoint.load=" + ck() + "/iter_0000002"});
  EXPECT_EQ(result(at2)["iteration"], 2);
  EXPECT_EQ(printed_as_metrics(result(at2)["val_loss"].get<double>()), printed_as_metrics(trained.at(2)));
}

TEST_F(EvaluateOnly, AutoResumeAndAPretrainedStartNameTheWeightsToo) {
  const std::map<int64_t, double> trained = train_and_save();
  const TrainSummary resumed =
      run("auto", {"validation.skip_train=true", "checkpoint.save=" + ck(), "checkpoint.auto_resume=true"});
  EXPECT_EQ(printed_as_metrics(result(resumed)["val_loss"].get<double>()), printed_as_metrics(trained.at(4)));
  // A checkpoint as pretrained_checkpoint: its weights alone, at step 0.
  const TrainSummary pretrained =
      run("pretrained", {"validation.skip_train=true", "checkpoint.pretrained_checkpoint=" + ck()});
  EXPECT_EQ(result(pretrained)["iteration"], 0);
  EXPECT_EQ(printed_as_metrics(result(pretrained)["val_loss"].get<double>()), printed_as_metrics(trained.at(4)));
}

TEST_F(EvaluateOnly, TheInitialWeightsOnlyWhenNothingNamesACheckpoint) {
  const TrainSummary fresh = run("fresh", {"validation.skip_train=true"});
  const nlohmann::json r = result(fresh);
  EXPECT_EQ(r["iteration"], 0);
  EXPECT_TRUE(r["weights"].is_null());
  EXPECT_TRUE(std::isfinite(r["val_loss"].get<double>()));
  EXPECT_FALSE(fs::exists(dir_ / "fresh" / "metrics.jsonl"));

  train_and_save();
  try {
    run("refused", {"validation.skip_train=true", "checkpoint.save=" + ck()});
    FAIL() << "a checkpoint.save holding checkpoints that nothing loads must be refused";
  } catch (const Error& e) {
    const std::string message = e.what();
    EXPECT_NE(message.find("checkpoint.save " + ck() + " holds checkpoints"), std::string::npos) << message;
    EXPECT_NE(message.find("checkpoint.load=" + ck()), std::string::npos) << message;
  }
  EXPECT_FALSE(fs::exists(dir_ / "refused" / "evaluations"));
  // checkpoint.auto_resume with a checkpoint.save that holds none (or is not there yet): the initial weights, as a run
  // starting fresh there would train from them.
  for (const char* save : {"empty_save", "missing_save"}) {
    if (std::string(save) == "empty_save") fs::create_directories(dir_ / save);
    const TrainSummary s =
        run(std::string("auto_") + save,
            {"validation.skip_train=true", "checkpoint.save=" + (dir_ / save).string(), "checkpoint.auto_resume=true"});
    EXPECT_TRUE(result(s)["weights"].is_null()) << save;
    EXPECT_EQ(result(s)["iteration"], 0) << save;
  }
  // A checkpoint.load with no checkpoint is the error a resume gives, not an evaluation of the initial weights.
  fs::create_directories(dir_ / "empty");
  EXPECT_THROW(run("empty_load", {"validation.skip_train=true", "checkpoint.load=" + (dir_ / "empty").string()}),
               Error);
}

TEST_F(EvaluateOnly, StartEvalAtIterHoldsEvaluationsBackDuringTrainingOnly) {
  for (const auto& [start, steps] :
       std::vector<std::pair<int, std::vector<int64_t>>>{{0, {1, 2, 3, 4, 5, 6}}, {3, {3, 4, 5, 6}}, {7, {6}}}) {
    const std::string name = "start" + std::to_string(start);
    run(name, {"train.train_iters=6", "validation.eval_interval=1", "validation.eval_iters=1",
               "validation.start_eval_at_iter=" + std::to_string(start)});
    std::vector<int64_t> evaluated;
    for (const auto& j : read_jsonl(dir_ / name / "metrics.jsonl")) {
      if (j.contains("val_loss")) evaluated.push_back(j["step"].get<int64_t>());
    }
    EXPECT_EQ(evaluated, steps) << "start_eval_at_iter " << start;
  }
}

}  // namespace
}  // namespace sg::train
