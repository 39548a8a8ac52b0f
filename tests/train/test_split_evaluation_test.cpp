// dataset.split's test share on the CPU backend, in process: with evaluation on, it is evaluated once after the last
// step's validation (Megatron's do_test): one metrics.jsonl record with test_loss and test_ppl, the report's "test
// loss", the summary's; none without evaluation or without a test share; the training bit for bit the same; and
// validation.skip_train gives the same test loss for the checkpoint, in its result file.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cpu_training_runs.h"
#include "data/indexed_dataset.h"
#include "test_dir.h"
#include "test_util.h"
#include "train/random_corpus.h"
#include "train/trainer.h"

namespace sg::train {
namespace {

namespace fs = std::filesystem;

class TestSplitEvaluation : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = test::fresh_test_dir("test_split_evaluation_test", fs::current_path());
    // 120 documents of 20 to 80 tokens below the model's 256.
    test::write_random_corpus((dir_ / "corpus").string(),
                              {.documents = 120, .min_tokens = 20, .max_tokens = 80, .vocab = 256, .seed = 7});
  }
  void TearDown() override {
    if (!HasFailure()) fs::remove_all(dir_);
  }

  test::CpuRunOutcome run(const std::string& name, std::vector<std::string> overrides) {
    overrides.insert(overrides.begin(), {"dataset.mock=false", "dataset.data_path=[" + (dir_ / "corpus").string() + "]",
                                         "train.train_iters=4", "validation.eval_iters=2"});
    TrainOptions options;
    options.run_dir = (dir_ / name).string();
    return test::train_on_cpu(test::one_layer_cpu_config(overrides), options);
  }

  std::vector<nlohmann::json> records(const std::string& name, const char* field) {
    std::vector<nlohmann::json> out;
    for (const auto& j : test::read_jsonl(dir_ / name / "metrics.jsonl")) {
      if (j.contains(field)) out.push_back(j);
    }
    return out;
  }

  fs::path dir_;
};

using test::printed_as_metrics;

TEST_F(TestSplitEvaluation, OnceAfterTheLastStepsValidationAndTheTrainingIsUnchanged) {
  const test::CpuRunOutcome r = run(
      "eval", {"dataset.split=80,10,10", "validation.eval_interval=2", "checkpoint.save=" + (dir_ / "ck").string()});
  ASSERT_EQ(r.error, "") << r.log;
  const std::vector<nlohmann::json> tests = records("eval", "test_loss");
  ASSERT_EQ(tests.size(), 1u);
  EXPECT_EQ(tests[0]["step"], 4);
  EXPECT_EQ(tests[0]["eval_batches"], 2);
  const double test_loss = tests[0]["test_loss"].get<double>();
  EXPECT_TRUE(std::isfinite(test_loss));
  EXPECT_NEAR(tests[0]["test_ppl"].get<double>(), std::exp(test_loss), 1e-6 * std::exp(test_loss));
  EXPECT_EQ(printed_as_metrics(r.summary.test_loss), printed_as_metrics(test_loss));
  // After the step-4 validation record, which reads other documents.
  const std::vector<nlohmann::json> lines = test::read_jsonl(dir_ / "eval" / "metrics.jsonl");
  ASSERT_TRUE(lines.back().contains("test_loss"));
  ASSERT_TRUE(lines[lines.size() - 2].contains("val_loss"));
  EXPECT_NE(lines[lines.size() - 2]["val_loss"].dump(), tests[0]["test_loss"].dump());
  EXPECT_NE(r.log.find("step      4 | test loss"), std::string::npos) << r.log;
  EXPECT_NE(r.log.find("test: once, after the last step's validation"), std::string::npos) << r.log;
  EXPECT_NE(test::read_file((dir_ / "eval" / "report.html").string()).find("test loss"), std::string::npos);

  // Without evaluation: no test record, and the same training records bit for bit.
  ASSERT_EQ(run("plain", {"dataset.split=80,10,10"}).error, "");
  EXPECT_TRUE(records("plain", "test_loss").empty());
  std::vector<std::string> plain, evaluated;
  for (const auto& j : records("plain", "loss")) plain.push_back(j["loss"].dump() + " " + j["grad_norm"].dump());
  for (const auto& j : records("eval", "loss")) evaluated.push_back(j["loss"].dump() + " " + j["grad_norm"].dump());
  EXPECT_EQ(plain, evaluated);

  // No test share: no test record.
  ASSERT_EQ(run("no_test", {"dataset.split=90,10,0", "validation.eval_interval=2"}).error, "");
  EXPECT_TRUE(records("no_test", "test_loss").empty());
  EXPECT_EQ(records("no_test", "val_loss").size(), 2u);

  // skip_train on the checkpoint: the same test loss, in the result file.
  const test::CpuRunOutcome again = run(
      "again", {"dataset.split=80,10,10", "validation.skip_train=true", "checkpoint.load=" + (dir_ / "ck").string()});
  ASSERT_EQ(again.error, "") << again.log;
  const nlohmann::json result = nlohmann::json::parse(test::read_file(again.summary.evaluation_path));
  EXPECT_EQ(printed_as_metrics(result["test_loss"].get<double>()), printed_as_metrics(test_loss));
  EXPECT_EQ(result["test_batches"], 2);
  EXPECT_NE(result["test_data"].get<std::string>().find("test split"), std::string::npos) << result.dump();
}

// A test share too small for one sample (a 969,30,1 split of a small corpus) is skipped, saying why: the run trains
// and validates as without it.
TEST_F(TestSplitEvaluation, AShareTooSmallForOneSampleIsSkippedAndSaid) {
  // 100 documents, the last of 10 tokens: split 98,1,1 gives the test share that one, short of a 33-token sample.
  data::IndexedDatasetWriter w((dir_ / "short_tail").string(), data::TokenDtype::uint16);
  for (int d = 0; d < 100; ++d) w.add_document(std::vector<int32_t>(d < 99 ? 40 : 10, 7));
  w.finalize();
  const test::CpuRunOutcome r = run("tiny_share", {"dataset.data_path=[" + (dir_ / "short_tail").string() + "]",
                                                   "dataset.split=98,1,1", "validation.eval_interval=2"});
  ASSERT_EQ(r.error, "") << r.log;
  EXPECT_TRUE(records("tiny_share", "test_loss").empty());
  EXPECT_EQ(records("tiny_share", "val_loss").size(), 2u);
  EXPECT_NE(r.log.find("test: skipped: dataset "), std::string::npos) << r.log;
  EXPECT_NE(r.log.find("(test split: documents [99, 100) of 100) has 10 tokens"), std::string::npos) << r.log;
}

}  // namespace
}  // namespace sg::train
