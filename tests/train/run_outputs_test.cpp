// A training run on the CPU backend, in process and through the binary: evaluation never changes the
// training (losses and grad norms bit for bit equal with and without it, dropout on), metrics.jsonl
// carries validation, wall time, tokens; runs/<name>/ holds config.yaml (which runs again) and
// report.html; TensorBoard event files are valid TFRecord with the scalars; `train PATH.yaml` writes to
// runs/<stem>/; `train --cuda_graph_impl` applies Bridge's side effects (the config the run saved shows
// them).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "config/config.h"
#include "config/validate.h"
#include "core/crc32c.h"
#include "cpu_training_runs.h"
#include "process_util.h"
#include "test_dir.h"
#include "train/trainer.h"

namespace sg::train {
namespace {

namespace fs = std::filesystem;

using test::read_file;

using test::read_jsonl;

class RunOutputs : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = sg::test::fresh_test_dir("run_outputs_test", fs::current_path());
  }
  void TearDown() override {
    if (!HasFailure()) fs::remove_all(dir_);
  }

  // A tiny model with dropout on mock data: the CPU trains a step in milliseconds.
  static std::vector<std::string> tiny(std::vector<std::string> more = {}) {
    std::vector<std::string> o = {"model.num_layers=2", "model.hidden_size=64", "model.num_attention_heads=4",
                                  "model.num_query_groups=2", "model.ffn_hidden_size=128", "model.seq_length=32",
                                  "dataset.seq_length=32", "model.vocab_size=256", "model.hidden_dropout=0.1", "model.attention_dropout=0.1",
                                  "train.micro_batch_size=2", "train.global_batch_size=4", "train.train_iters=6",
                                  "optimizer.lr=3e-3", "scheduler.lr_warmup_iters=1", "logger.log_interval=1"};
    o.insert(o.end(), more.begin(), more.end());
    return o;
  }

  TrainSummary run(const std::string& name, std::vector<std::string> overrides) {
    TrainOptions options;
    options.run_dir = (dir_ / name).string();
    options.force_cpu = true;
    return train(config::load_config("llama/tiny", tiny(std::move(overrides))), options);
  }

  fs::path dir_;
};

TEST_F(RunOutputs, EvaluationNeverChangesTheTrainingBitForBit) {
  run("plain", {});
  const TrainSummary s = run("eval", {"train.eval_interval=2", "train.eval_iters=2",
                                      "logger.tensorboard_dir=" + (dir_ / "tb").string()});
  EXPECT_TRUE(std::isfinite(s.last_val_loss));
  std::map<int64_t, std::string> plain;  // step -> "loss grad_norm" as printed (%.9g: equal text = equal float)
  for (const auto& j : read_jsonl(dir_ / "plain" / "metrics.jsonl")) {
    plain[j["step"].get<int64_t>()] = j["loss"].dump() + " " + j["grad_norm"].dump();
  }
  ASSERT_EQ(plain.size(), 6u);
  std::vector<int64_t> eval_steps;
  int64_t step_lines = 0;
  for (const auto& j : read_jsonl(dir_ / "eval" / "metrics.jsonl")) {
    const int64_t step = j["step"].get<int64_t>();
    if (j.contains("val_loss")) {
      eval_steps.push_back(step);
      const double loss = j["val_loss"].get<double>();
      EXPECT_NEAR(j["val_ppl"].get<double>(), std::exp(loss), 1e-6 * std::exp(loss));
      EXPECT_EQ(j["eval_batches"].get<int64_t>(), 2);
      EXPECT_EQ(j["tokens"].get<int64_t>(), step * 4 * 32);
      continue;
    }
    ++step_lines;
    EXPECT_EQ(j["loss"].dump() + " " + j["grad_norm"].dump(), plain[step]) << "step " << step;
    EXPECT_EQ(j["tokens"].get<int64_t>(), step * 4 * 32);
    EXPECT_GE(j["wall_time_s"].get<double>(), 0.0);
    EXPECT_GT(j["device_memory_used"].get<uint64_t>(), 0u);  // CPU: resident memory
  }
  EXPECT_EQ(step_lines, 6);
  EXPECT_EQ(eval_steps, (std::vector<int64_t>{2, 4, 6}));
}

TEST_F(RunOutputs, RunFolderHasConfigReportAndTensorBoardEvents) {
  run("r", {"train.eval_interval=3", "train.eval_iters=1", "logger.tensorboard_dir=" + (dir_ / "tb").string()});
  // config.yaml: the resolved configuration, which validates and runs again.
  const config::Config saved = config::load_config((dir_ / "r" / "config.yaml").string());
  EXPECT_TRUE(config::validate(saved).ok());
  EXPECT_EQ(saved.validation.eval_interval.value_or(0), 3);
  EXPECT_EQ(saved.model.hidden_size, 64);
  // report.html: self-contained charts.
  const std::string html = read_file(dir_ / "r" / "report.html");
  EXPECT_NE(html.find("<svg"), std::string::npos);
  EXPECT_NE(html.find("validation loss"), std::string::npos);
  EXPECT_NE(html.find("finished: step 6 of 6"), std::string::npos);
  EXPECT_EQ(html.find("http://"), std::string::npos);  // nothing to fetch
  EXPECT_EQ(html.find("<script"), std::string::npos);

  // TensorBoard: one events.out.tfevents.* file of TFRecords with valid masked CRC-32Cs.
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir_ / "tb")) files.push_back(e.path());
  ASSERT_EQ(files.size(), 1u);
  EXPECT_NE(files[0].filename().string().find("events.out.tfevents."), std::string::npos);
  const std::string bytes = read_file(files[0]);
  size_t pos = 0, records = 0;
  std::string all;
  while (pos < bytes.size()) {
    ASSERT_LE(pos + 12, bytes.size());
    uint64_t length = 0;
    uint32_t length_crc = 0, data_crc = 0;
    std::memcpy(&length, bytes.data() + pos, 8);
    std::memcpy(&length_crc, bytes.data() + pos + 8, 4);
    ASSERT_EQ(length_crc, masked_crc32c(bytes.data() + pos, 8)) << "record " << records;
    ASSERT_LE(pos + 16 + length, bytes.size());
    std::memcpy(&data_crc, bytes.data() + pos + 12 + length, 4);
    ASSERT_EQ(data_crc, masked_crc32c(bytes.data() + pos + 12, length)) << "record " << records;
    all.append(bytes.data() + pos + 12, length);
    pos += 16 + length;
    ++records;
  }
  // file version + session start + 6 steps x 7 scalars (CPU: no capture step) + 2 evaluations x 2.
  EXPECT_EQ(records, 2u + 6u * 7u + 2u * 2u);
  for (const char* tag : {"brain.Event:2", "lm loss", "lm loss validation", "learning-rate", "grad-norm",
                          "tokens-per-second", "mem-allocated-bytes"}) {
    EXPECT_NE(all.find(tag), std::string::npos) << tag;
  }
}

TEST_F(RunOutputs, TrainYamlWritesToItsStemAndGraphFlagsHaveBridgesSideEffects) {
  // A recipe file of the user's own, run from its folder: runs/<stem>/, not runs/<file name>/.
  std::ofstream(dir_ / "mine.yaml") << config::emit_yaml(config::load_config("llama/tiny", tiny()));
  const auto r = test::run_stepgraph({"train", "mine.yaml", "--cpu", "--plain", "train.train_iters=2",
                                      "--cuda_graph_impl", "local"},
                                     true, dir_.string());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(fs::exists(dir_ / "runs" / "mine" / "metrics.jsonl")) << r.output;
  EXPECT_TRUE(fs::exists(dir_ / "runs" / "mine" / "report.html")) << r.output;
  // The saved config shows the flag and its side effects: both RNG trackers on, as Bridge sets them;
  // the loss NaN check stays on (Bridge turns it off for a whole-step graph; stepgraph's works there).
  const config::Config saved = config::load_config((dir_ / "runs" / "mine" / "config.yaml").string());
  EXPECT_EQ(saved.model.cuda_graph_impl, "local");
  EXPECT_TRUE(saved.model.use_te_rng_tracker);
  EXPECT_TRUE(saved.rng.te_rng_tracker);
  EXPECT_TRUE(saved.rerun_state_machine.check_for_nan_in_loss);
  // The CPU backend shows what is meaningful there, not a GPU's zeros.
  EXPECT_EQ(r.output.find("TFLOP/s | MFU"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("GFLOP/s"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("parameters"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("tokens per step"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("on a GPU: GPU memory plan"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("on a GPU: CUDA graphs: local"), std::string::npos) << r.output;

  const auto bad = test::run_stepgraph({"train", "mine.yaml", "--cpu", "--cuda_graph_impl", "full"}, true,
                                       dir_.string());
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("--cuda_graph_impl: not a valid implementation: 'full'"), std::string::npos) << bad.output;
  const auto scope = test::run_stepgraph({"train", "mine.yaml", "--cpu", "--cuda_graph_impl", "transformer_engine",
                                          "--cuda_graph_scope", "attn,mlp", "train.train_iters=2", "--plain"},
                                         true, dir_.string());
  EXPECT_EQ(scope.exit_code, 0) << scope.output;

  // The run's own config.yaml runs again in its own folder (the header says so), not in runs/config/; its derived
  // keys follow the override (the decay is the new train_iters, as from mine.yaml, not the first run's).
  const auto again = test::run_stepgraph({"train", "runs/mine/config.yaml", "--cpu", "--plain", "train.train_iters=2"},
                                         true, dir_.string());
  ASSERT_EQ(again.exit_code, 0) << again.output;
  EXPECT_FALSE(fs::exists(dir_ / "runs" / "config")) << again.output;
  EXPECT_EQ(read_jsonl(dir_ / "runs" / "mine" / "metrics.jsonl").size(), 2u) << again.output;
  EXPECT_NE(test::read_file(dir_ / "runs" / "mine" / "config.yaml").find("  lr_decay_iters: null  # = 2 ("),
            std::string::npos);
  EXPECT_TRUE(fs::exists(dir_ / "runs" / "mine" / "previous" / "run-2" / "metrics.jsonl")) << again.output;
}

TEST_F(RunOutputs, AMissingDatasetSaysHowToMakeOne) {
  const auto r = test::run_stepgraph({"train", "llama/tiny", "--cpu", "dataset.mock=false",
                                      "dataset.data_path=[" + (dir_ / "nope").string() + "]"});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("stepgraph data synth --out"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("tools/preprocess_data.py"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace sg::train
