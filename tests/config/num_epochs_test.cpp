// Bridge's train.num_epochs: train_iters = ceil(epochs x ceil(samples per epoch / global batch)), the samples of an
// epoch counted from the index files (the train share with dataset.split) as the loader cuts them; refused beside
// another length, with mock data, a weighted blend of several datasets or no dataset.
#include "config/num_epochs.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "config/validate.h"
#include "data/blended_dataset.h"
#include "data/dataset_split.h"
#include "data/indexed_dataset.h"
#include "test_dir.h"
#include "validation_report_text.h"

namespace sg::config {
namespace {

namespace fs = std::filesystem;
using test::describe;
using test::names_key;

class NumEpochs : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::canonical(sg::test::fresh_test_dir("sg_num_epochs"));
    // 40 documents of 100 tokens: 4000 tokens.
    data::IndexedDatasetWriter w(corpus(), data::TokenDtype::uint16);
    for (int d = 0; d < 40; ++d) w.add_document(std::vector<int32_t>(100, d + 1));
    w.finalize();
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string corpus() const { return (dir_ / "corpus").string(); }
  // llama/tiny (global batch 4) at seq_length 64 on the corpus, by epochs.
  ValidationReport check(std::vector<std::string> more) const {
    std::vector<std::string> overrides = {"dataset.mock=false",
                                          "dataset.data_path=[" + corpus() + "]",
                                          "model.vocab_size=256",
                                          "model.seq_length=64",
                                          "dataset.seq_length=64",
                                          "train.train_iters=null",
                                          "scheduler.lr_decay_iters=null",
                                          "scheduler.lr_warmup_iters=1"};
    overrides.insert(overrides.end(), more.begin(), more.end());
    return validate(load_config("llama/tiny", overrides));
  }
  // What the training loader counts: "N samples per epoch" in its description.
  uint64_t loader_samples(const std::optional<data::SplitShares>& split) const {
    data::DataLoaderOptions o;
    o.data_path = {corpus()};
    o.seq_length = 64;
    o.vocab_size = 256;
    o.split_shares = split;
    const std::string text = data::DataLoader(o).describe();
    const size_t at = text.find(" samples per epoch");
    return std::stoull(text.substr(text.rfind(' ', at - 1) + 1));
  }
  fs::path dir_;
};

bool refuses(const ValidationReport& r, const std::string& key) {
  for (const Violation& v : r.violations) {
    if (names_key(v, key)) return true;
  }
  return false;
}

TEST_F(NumEpochs, TrainItersAreTheEpochsStepsRoundedUpAsBridge) {
  // (4000 - 1) / 64 = 62 samples; ceil(62 / 4) = 16 steps an epoch.
  data::DataLoaderOptions o;
  o.data_path = {corpus()};
  o.seq_length = 64;
  EXPECT_EQ(data::samples_per_epoch(o), 62u);
  EXPECT_EQ(loader_samples(std::nullopt), 62u);
  const ValidationReport two = check({"train.num_epochs=2"});
  ASSERT_TRUE(two.ok()) << describe(two);
  EXPECT_EQ(two.config.train.train_iters.value_or(0), 32);
  EXPECT_EQ(two.config.scheduler.lr_decay_iters.value_or(0), 32);  // the decay's default is the run
  bool noted = false;
  for (const Note& n : two.notes) noted |= n.message.find("train.num_epochs 2: 32 steps (62 samples per epoch") == 0;
  EXPECT_TRUE(noted) << describe(two);
  // ceil(1.5 x 16) = 24; a run's config.yaml writes the derived train_iters null, so a rerun derives it again.
  const ValidationReport half = check({"train.num_epochs=1.5"});
  EXPECT_EQ(half.config.train.train_iters.value_or(0), 24);
  EXPECT_NE(emit_yaml(half.config, "", EmitDerived::as_null).find("  train_iters: null  # = 24"), std::string::npos);
  // The train split's share only: documents [0, 36) of 40 at 90,10,0 hold 3600 tokens, 56 samples, 14 steps.
  const data::SplitShares shares = data::parse_split("90,10,0");
  o.split_shares = shares;
  EXPECT_EQ(data::samples_per_epoch(o), 56u);
  EXPECT_EQ(loader_samples(shares), 56u);
  EXPECT_EQ(check({"train.num_epochs=1", "dataset.split=90,10,0"}).config.train.train_iters.value_or(0), 14);
}

TEST_F(NumEpochs, AnotherLengthMockDataOrABlendIsRefused) {
  EXPECT_TRUE(refuses(check({"train.num_epochs=1", "train.train_iters=10"}), "train.num_epochs"));
  EXPECT_TRUE(refuses(check({"train.num_epochs=0"}), "train.num_epochs"));
  EXPECT_TRUE(refuses(check({"train.num_epochs=-1"}), "train.num_epochs"));
  EXPECT_TRUE(refuses(check({"train.num_epochs=1", "dataset.mock=true", "dataset.data_path=[]"}), "dataset.mock"));
  const ValidationReport blend =
      check({"train.num_epochs=1", "dataset.data_path=[\"0.5\"," + corpus() + ",\"0.5\"," + corpus() + "]"});
  ASSERT_TRUE(refuses(blend, "dataset.data_path")) << describe(blend);
  EXPECT_NE(describe(blend).find("weighted blend"), std::string::npos) << describe(blend);
  // One dataset with a weight is all of the stream: it has an epoch.
  EXPECT_TRUE(check({"train.num_epochs=1", "dataset.data_path=[\"1\"," + corpus() + "]"}).ok());
  // A missing dataset is refused once, by the data check that names the file and how to make it; neither the epoch
  // count nor the train_iters it could not derive adds a second or third error.
  const ValidationReport missing = check({"train.num_epochs=1", "dataset.data_path=[" + corpus() + "_none]"});
  ASSERT_EQ(missing.violations.size(), 1u) << describe(missing);
  EXPECT_NE(missing.violations[0].message.find("_none.idx and "), std::string::npos) << describe(missing);
  EXPECT_TRUE(refuses(missing, "dataset.data_path")) << describe(missing);
}

}  // namespace
}  // namespace sg::config
