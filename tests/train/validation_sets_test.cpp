// validation.multiple_validation_sets (Megatron-LM's) on the CPU backend, in process: each validation dataset is
// evaluated on its own, with its own loss, and that loss is the one a run validating on that dataset alone records;
// metrics.jsonl gets one record a set with its "val_set" name; TensorBoard's tags, the progress lines, the run's last
// line and report.html name the sets; validation.skip_train writes one result a set. Also the rules: names one a
// dataset.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cpu_training_runs.h"
#include "test_dir.h"
#include "test_util.h"
#include "train/random_corpus.h"
#include "train/trainer.h"

namespace sg::train {
namespace {

namespace fs = std::filesystem;

class ValidationSets : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = test::fresh_test_dir("validation_sets_test", fs::current_path());
    for (const char* name : {"train", "wiki", "code"}) {
      test::write_random_corpus(
          (dir_ / name).string(),
          {.documents = 60, .min_tokens = 20, .max_tokens = 80, .vocab = 256, .seed = static_cast<uint64_t>(name[0])});
    }
  }
  void TearDown() override {
    if (!HasFailure()) fs::remove_all(dir_);
  }
  std::string prefix(const char* name) const { return (dir_ / name).string(); }

  test::CpuRunOutcome run(const std::string& name, std::vector<std::string> overrides) {
    overrides.insert(overrides.begin(), {"dataset.mock=false", "dataset.data_path=[" + prefix("train") + "]",
                                         "train.train_iters=2", "validation.eval_iters=2", "validation.eval_interval=2",
                                         "checkpoint.save=" + (dir_ / (name + "_ck")).string()});
    TrainOptions options;
    options.run_dir = (dir_ / name).string();
    return test::train_on_cpu(test::one_layer_cpu_config(overrides), options);
  }

  std::vector<nlohmann::json> validations(const std::string& name) {
    std::vector<nlohmann::json> out;
    for (const auto& j : test::read_jsonl(dir_ / name / "metrics.jsonl")) {
      if (j.contains("val_loss")) out.push_back(j);
    }
    return out;
  }

  fs::path dir_;
};

using test::printed_as_metrics;

TEST_F(ValidationSets, EachDatasetIsEvaluatedAloneAndRecordedByName) {
  const std::string both = "dataset.valid_data_path=[" + prefix("wiki") + "," + prefix("code") + "]";
  const test::CpuRunOutcome r =
      run("sets", {both, "validation.multiple_validation_sets=true", "validation.validation_set_names=[wiki,code]",
                   "logger.tensorboard_dir=" + (dir_ / "tb").string()});
  ASSERT_EQ(r.error, "") << r.log;
  // TensorBoard: Megatron's tag with the set's suffix, for the loss and the perplexity.
  std::string events;
  for (const auto& file : fs::recursive_directory_iterator(dir_ / "tb")) {
    if (file.is_regular_file()) events += test::read_file(file.path().string());
  }
  for (const char* tag : {"lm loss validation-wiki", "lm loss validation-code ppl"}) {
    EXPECT_NE(events.find(tag), std::string::npos) << tag;
  }
  const std::vector<nlohmann::json> records = validations("sets");
  ASSERT_EQ(records.size(), 2u);
  EXPECT_EQ(records[0]["val_set"], "wiki");
  EXPECT_EQ(records[1]["val_set"], "code");
  EXPECT_EQ(records[0]["step"], 2);
  EXPECT_EQ(records[0]["eval_batches"], 2);
  EXPECT_NE(records[0]["val_loss"].dump(), records[1]["val_loss"].dump());
  EXPECT_NE(r.log.find("validation set wiki: every 2 steps"), std::string::npos) << r.log;
  EXPECT_NE(r.log.find("step      2 | val code loss"), std::string::npos) << r.log;
  ASSERT_EQ(r.summary.val_set_losses.size(), 2u);
  EXPECT_EQ(r.summary.val_set_losses[1].first, "code");
  const std::string report = test::read_file((dir_ / "sets" / "report.html").string());
  EXPECT_NE(report.find("validation loss, set wiki"), std::string::npos);
  EXPECT_NE(report.find("last val loss, set code"), std::string::npos);

  // Each set's loss is the one a run validating on that dataset alone records, to the printed digit; the training
  // is the same.
  for (size_t i = 0; i < 2; ++i) {
    const char* name = i == 0 ? "wiki" : "code";
    SCOPED_TRACE(name);
    const std::string alone = std::string("alone_") + name;
    ASSERT_EQ(run(alone, {"dataset.valid_data_path=[" + prefix(name) + "]"}).error, "");
    const std::vector<nlohmann::json> own = validations(alone);
    ASSERT_EQ(own.size(), 1u);
    EXPECT_FALSE(own[0].contains("val_set"));
    EXPECT_EQ(own[0]["val_loss"].dump(), records[i]["val_loss"].dump());
  }
  // Without names the sets are their indices (Megatron's "-0", "-1").
  ASSERT_EQ(run("indices", {both, "validation.multiple_validation_sets=true"}).error, "");
  const std::vector<nlohmann::json> indexed = validations("indices");
  ASSERT_EQ(indexed.size(), 2u);
  EXPECT_EQ(indexed[1]["val_set"], "1");
  EXPECT_EQ(indexed[1]["val_loss"].dump(), records[1]["val_loss"].dump());

  // skip_train on the checkpoint: one result a set, the same losses.
  const test::CpuRunOutcome again =
      run("again", {both, "validation.multiple_validation_sets=true", "validation.validation_set_names=[wiki,code]",
                    "validation.skip_train=true", "checkpoint.load=" + (dir_ / "sets_ck").string()});
  ASSERT_EQ(again.error, "") << again.log;
  const nlohmann::json result = nlohmann::json::parse(test::read_file(again.summary.evaluation_path));
  ASSERT_EQ(result["validation_sets"].size(), 2u) << result.dump();
  EXPECT_EQ(result["validation_sets"][0]["name"], "wiki");
  EXPECT_EQ(printed_as_metrics(result["validation_sets"][1]["val_loss"].get<double>()),
            printed_as_metrics(records[1]["val_loss"].get<double>()));
  EXPECT_FALSE(result.contains("val_loss"));
}

TEST_F(ValidationSets, TheRulesNameTheKeys) {
  const std::string both = "dataset.valid_data_path=[" + prefix("wiki") + "," + prefix("code") + "]";
  const auto error = [&](const std::string& name, std::vector<std::string> overrides) {
    const test::CpuRunOutcome r = run(name, std::move(overrides));
    EXPECT_NE(r.error, "") << name;
    return r.error + r.log;
  };
  EXPECT_NE(error("one_name", {both, "validation.multiple_validation_sets=true", "validation.validation_set_names=[a]"})
                .find("gives 1 name for 2 validation datasets"),
            std::string::npos);
  EXPECT_NE(error("twice", {both, "validation.multiple_validation_sets=true", "validation.validation_set_names=[a,a]"})
                .find("'a' is given twice"),
            std::string::npos);
  EXPECT_NE(
      error("spaces", {both, "validation.multiple_validation_sets=true", "validation.validation_set_names=[a,\"b c\"]"})
          .find("'b c' is not a name"),
      std::string::npos);
  EXPECT_NE(error("names_only", {both, "validation.validation_set_names=[a,b]"})
                .find("validation.multiple_validation_sets=true"),
            std::string::npos);
  EXPECT_NE(
      error("weighted", {"dataset.valid_data_path=[\"0.5\"," + prefix("wiki") + ",\"0.5\"," + prefix("code") + "]",
                         "validation.multiple_validation_sets=true"})
          .find("Megatron asserts an unweighted list"),
      std::string::npos);
}

}  // namespace
}  // namespace sg::train
