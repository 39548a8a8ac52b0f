// The optimizer the backends are made with: AdamW's weight decay is the weight-decay schedule's when its keys are set
// (Bridge's recipes: 0.033 beside optimizer.weight_decay 0.1), so a run with them trains bit for bit as a run with
// optimizer.weight_decay at that value, and differently from one with 0.1; a decay that changes reaches the step as
// Megatron's schedule, trains otherwise than a constant one and resumes mid-schedule bit for bit; a sample-based
// schedule is its steps'; the WSD and inverse-square-root lr schedules reach the step as Megatron computes them.
#include "train/backend_factory.h"

#include <gtest/gtest.h>

#include <cmath>
#include <csignal>
#include <filesystem>
#include <string>
#include <vector>

#include "checkpoint/checkpoint_dir.h"
#include "config/validate.h"
#include "cpu_training_runs.h"
#include "test_dir.h"
#include "train/run_plan.h"

namespace sg::train {
namespace {

namespace fs = std::filesystem;

TEST(OptimizerSpec, TakesTheWeightDecayScheduleOverOptimizerWeightDecay) {
  const config::Config c =
      config::validate(test::one_layer_cpu_config({"optimizer.weight_decay=0.1", "scheduler.start_weight_decay=0.033",
                                                   "scheduler.end_weight_decay=0.033"}))
          .config;
  EXPECT_DOUBLE_EQ(optimizer_spec(c).weight_decay, 0.033);
  EXPECT_DOUBLE_EQ(
      optimizer_spec(config::validate(test::one_layer_cpu_config({"optimizer.weight_decay=0.1"})).config).weight_decay,
      0.1);
}

// A decay that changes: from the start to the end (a null one is optimizer.weight_decay) over the run's samples.
TEST(OptimizerSpec, CarriesAChangingWeightDecaySchedule) {
  const config::Config c =
      config::validate(
          test::one_layer_cpu_config({"train.train_iters=6", "optimizer.weight_decay=0.1",
                                      "scheduler.start_weight_decay=0.01", "scheduler.weight_decay_incr_style=cosine"}))
          .config;
  const model::OptimizerSpec o = optimizer_spec(c);
  EXPECT_DOUBLE_EQ(o.weight_decay, 0.01);
  EXPECT_DOUBLE_EQ(o.end_weight_decay, 0.1);
  EXPECT_EQ(o.weight_decay_incr_style, model::WeightDecayIncrStyle::cosine);
  EXPECT_EQ(o.weight_decay_incr_samples, 12);  // 6 steps of 2 sequences
  EXPECT_NE(describe_optimizer(c).find("weight decay 0.01 to 0.1, cosine over 6 steps;"), std::string::npos)
      << describe_optimizer(c);
}

TEST(OptimizerSpec, AScheduledDecayTrainsAsThatOptimizerWeightDecay) {
  const fs::path dir = test::fresh_test_dir("backend_factory_test", fs::current_path());
  const auto losses = [&](const std::string& name, std::vector<std::string> overrides) {
    overrides.insert(overrides.end(), {"train.train_iters=4", "optimizer.lr=0.01"});
    TrainOptions options;
    options.run_dir = (dir / name).string();
    const test::CpuRunOutcome r = test::train_on_cpu(test::one_layer_cpu_config(overrides), options);
    EXPECT_EQ(r.error, "") << name;
    std::vector<std::string> out;  // as metrics.jsonl prints them: equal text, equal floats
    for (const auto& j : test::read_jsonl(dir / name / "metrics.jsonl")) {
      if (j.contains("loss")) out.push_back(j["loss"].dump() + " " + j["grad_norm"].dump());
    }
    return out;
  };
  const auto scheduled = losses("scheduled", {"optimizer.weight_decay=0.1", "scheduler.start_weight_decay=0.033",
                                              "scheduler.end_weight_decay=0.033"});
  ASSERT_EQ(scheduled.size(), 4u);
  EXPECT_EQ(scheduled, losses("plain", {"optimizer.weight_decay=0.033"}));
  EXPECT_NE(scheduled, losses("unscheduled", {"optimizer.weight_decay=0.1"}));
  fs::remove_all(dir);
}

// Megatron's sample-based lengths are the same schedule as the steps they make: a run of train_samples 8 with a
// 2-sample warmup and a 200-sample decay (global batch 2) trains bit for bit as 4 steps, a 1-step warmup and a
// 100-step decay, learning rates included.
TEST(OptimizerSpec, ASampleBasedScheduleTrainsAsItsSteps) {
  const fs::path dir = test::fresh_test_dir("backend_factory_samples_test", fs::current_path());
  const auto records = [&](const std::string& name, std::vector<std::string> overrides) {
    overrides.insert(overrides.begin(), "optimizer.lr=0.01");
    TrainOptions options;
    options.run_dir = (dir / name).string();
    const test::CpuRunOutcome r = test::train_on_cpu(test::one_layer_cpu_config(overrides), options);
    EXPECT_EQ(r.error, "") << name;
    std::vector<std::string> out;
    for (const auto& j : test::read_jsonl(dir / name / "metrics.jsonl")) {
      if (j.contains("loss")) out.push_back(j["loss"].dump() + " " + j["grad_norm"].dump() + " " + j["lr"].dump());
    }
    return out;
  };
  const auto samples = records(
      "samples", {"train.train_iters=null", "train.train_samples=8", "scheduler.lr_warmup_iters=0",
                  "scheduler.lr_decay_iters=null", "scheduler.lr_warmup_samples=2", "scheduler.lr_decay_samples=200"});
  ASSERT_EQ(samples.size(), 4u);
  EXPECT_EQ(samples,
            records("iters", {"train.train_iters=4", "scheduler.lr_warmup_iters=1", "scheduler.lr_decay_iters=100"}));
  EXPECT_NE(samples,
            records("other", {"train.train_iters=4", "scheduler.lr_warmup_iters=2", "scheduler.lr_decay_iters=100"}));
  fs::remove_all(dir);
}

// Megatron's decay that changes during the run, on the CPU backend: a linear schedule trains otherwise than its
// start's constant decay, and a run stopped mid-schedule and resumed from its checkpoint trains bit for bit as the
// uninterrupted one (the decay follows the steps done the checkpoint restores).
TEST(OptimizerSpec, AChangingWeightDecayTrainsAndResumesMidScheduleBitForBit) {
  const fs::path dir = test::fresh_test_dir("backend_factory_wd_test", fs::current_path());
  const auto run = [&](const std::string& name, std::vector<std::string> overrides, int64_t stop_after_save) {
    overrides.insert(overrides.begin(), {"train.train_iters=6", "optimizer.lr=0.01", "checkpoint.save_interval=3"});
    TrainOptions options;
    options.run_dir = (dir / name).string();
    options.on_saved = [stop_after_save](int64_t step) {
      if (step == stop_after_save) graph::request_stop(SIGTERM);
    };
    const test::CpuRunOutcome r = test::train_on_cpu(test::one_layer_cpu_config(overrides), options);
    EXPECT_EQ(r.error, "") << name << "\n" << r.log;
    std::vector<std::string> out;
    for (const auto& j : test::read_jsonl(dir / name / "metrics.jsonl")) {
      if (j.contains("loss")) out.push_back(j["loss"].dump() + " " + j["grad_norm"].dump());
    }
    return out;
  };
  const std::vector<std::string> linear = {"scheduler.start_weight_decay=0.0", "scheduler.end_weight_decay=1.0",
                                           "scheduler.weight_decay_incr_style=linear"};
  const auto with = [&](std::vector<std::string> more) {
    more.insert(more.begin(), linear.begin(), linear.end());
    return more;
  };
  const std::string whole_ckpt = (dir / "whole_ckpt").string(), ckpt = (dir / "ckpt").string();
  const auto whole = run("whole", with({"checkpoint.save=" + whole_ckpt}), -1);
  ASSERT_EQ(whole.size(), 6u);
  EXPECT_NE(whole, run("constant", {"optimizer.weight_decay=0.0"}, -1));
  // Stopped after step 3's save, then resumed to step 6 in the same run folder.
  EXPECT_EQ(run("stopped", with({"checkpoint.save=" + ckpt}), 3).size(), 3u);
  EXPECT_EQ(run("stopped", with({"checkpoint.load=" + ckpt, "checkpoint.save=" + ckpt}), -1), whole);
  for (const char* file : {checkpoint::kModelFile, checkpoint::kOptimizerMainParamsFile,
                           checkpoint::kOptimizerExpAvgFile, checkpoint::kOptimizerExpAvgSqFile}) {
    EXPECT_EQ(test::read_file(whole_ckpt + "/iter_0000006/" + file), test::read_file(ckpt + "/iter_0000006/" + file))
        << file;
  }
  fs::remove_all(dir);
}

// Megatron's other lr styles reach the step: the CPU backend's logged learning rates are get_lr's, computed here by
// hand (a global batch of 2; Megatron's warmup one update earlier), and the run plan says the schedule.
TEST(LrSchedule, WsdAndInverseSquareRootTrainWithMegatronsLearningRates) {
  const fs::path dir = test::fresh_test_dir("backend_factory_lr_test", fs::current_path());
  const auto learning_rates = [&](const std::string& name, std::vector<std::string> overrides) {
    overrides.insert(overrides.begin(), {"train.train_iters=6", "optimizer.lr=0.01", "optimizer.min_lr=0.001"});
    TrainOptions options;
    options.run_dir = (dir / name).string();
    const test::CpuRunOutcome r = test::train_on_cpu(test::one_layer_cpu_config(overrides), options);
    EXPECT_EQ(r.error, "") << name << "\n" << r.log;
    std::vector<double> out;
    for (const auto& j : test::read_jsonl(dir / name / "metrics.jsonl")) {
      if (j.contains("loss")) out.push_back(j["lr"].get<double>());
    }
    return out;
  };
  const auto expect_near = [](const std::vector<double>& got, const std::vector<double>& want) {
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-7 * want[i]) << "step " << i + 1;
  };
  // WSD, linear annealing over the last 3 of 6 steps, after a 1-step warmup from 0.002.
  const std::vector<std::string> wsd = {"scheduler.lr_decay_style=WSD", "scheduler.lr_wsd_decay_style=linear",
                                        "scheduler.lr_wsd_decay_iters=3", "scheduler.lr_decay_iters=6",
                                        "scheduler.lr_warmup_iters=1", "scheduler.lr_warmup_init=0.002"};
  expect_near(learning_rates("wsd", wsd), {0.01, 0.01, 0.01, 0.01, 0.001 + 0.009 * 2.0 / 3.0, 0.001 + 0.009 / 3.0});
  // The inverse square root of the samples done over the warmup's (2 steps of 2 samples).
  const std::vector<std::string> isr = {"scheduler.lr_decay_style=inverse-square-root", "scheduler.lr_warmup_iters=2",
                                        "scheduler.lr_decay_iters=100"};
  expect_near(learning_rates("isr", isr), {0.005, 0.01, 0.01, 0.01 * std::sqrt(4.0 / 6.0), 0.01 * std::sqrt(0.5),
                                           0.01 * std::sqrt(0.4)});
  const auto plan = [](std::vector<std::string> overrides) {
    overrides.insert(overrides.begin(), {"train.train_iters=6", "optimizer.lr=0.01", "optimizer.min_lr=0.001"});
    const config::ValidationReport r = config::validate(test::one_layer_cpu_config(overrides));
    EXPECT_TRUE(r.ok());
    return describe_lr_schedule(r.config);
  };
  EXPECT_EQ(plan(wsd), "lr: warmup over 1 step from 0.002 to 0.01, then WSD: 0.01 until step 3, then linear annealing "
                       "to 0.001 at step 6");
  EXPECT_EQ(plan({"scheduler.lr_decay_style=constant", "scheduler.lr_warmup_iters=0"}), "lr: 0.01 constant");
  EXPECT_EQ(plan(isr),
            "lr: warmup over 2 steps from 0 to 0.01, then inverse square root: 0.01 x sqrt(warmup samples / "
            "samples done), at least 0.001; 0.001 from step 100");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace sg::train
