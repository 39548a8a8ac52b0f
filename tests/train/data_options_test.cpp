// The data loaders' options from the config (train/data_options.h): training reads dataset.split's train share
// of dataset.data_path, validation its valid share or dataset.valid_data_path whole (named by its key in errors),
// from another seed stream; mock tokens read no split.
#include "train/data_options.h"

#include <gtest/gtest.h>

#include "config/model_config.h"
#include "data/dataset_split.h"
#include "train/mock_training.h"

namespace sg::train {
namespace {

config::Config with_files(const std::string& split) {
  config::Config c = test::validated_tiny({"dataset.mock=true"});
  c.dataset.mock = false;  // the options read no file: the paths need not exist
  c.dataset.data_path = {"/data/a", "/data/b"};
  if (!split.empty()) c.dataset.split = split;
  return c;
}

TEST(DataOptions, TrainingAndValidationReadTheirSharesOfTheSplit) {
  const config::Config c = with_files("90,6,4");
  const model::ModelSpec m = config::model_spec(c);
  const data::DataLoaderOptions train = training_data_options(c, m), valid = validation_data_options(c, m);
  const data::SplitShares shares = data::parse_split("90,6,4");
  for (const auto* o : {&train, &valid}) {
    EXPECT_EQ(o->data_path, c.dataset.data_path);
    EXPECT_EQ(o->data_path_key, "dataset.data_path");
    ASSERT_TRUE(o->split_shares.has_value());
    EXPECT_EQ(*o->split_shares, shares);
    EXPECT_EQ(o->seq_length, m.seq_length);
    EXPECT_EQ(o->vocab_size, m.vocab_size);
    EXPECT_FALSE(o->mock);
  }
  EXPECT_EQ(train.split, data::Split::train);
  EXPECT_EQ(valid.split, data::Split::valid);
  EXPECT_EQ(train.seed, static_cast<uint64_t>(c.rng.seed));
  EXPECT_NE(valid.seed, train.seed);
}

TEST(DataOptions, WithoutASplitTrainingReadsEverythingAndValidationItsOwnPaths) {
  config::Config c = with_files("");
  c.dataset.valid_data_path = {"/data/v"};
  const model::ModelSpec m = config::model_spec(c);
  EXPECT_FALSE(training_data_options(c, m).split_shares.has_value());
  const data::DataLoaderOptions valid = validation_data_options(c, m);
  EXPECT_EQ(valid.data_path, c.dataset.valid_data_path);
  EXPECT_EQ(valid.data_path_key, "dataset.valid_data_path");
  EXPECT_FALSE(valid.split_shares.has_value());
}

TEST(DataOptions, MockTokensReadNoSplit) {
  config::Config c = with_files("90,6,4");
  c.dataset.mock = true;
  const model::ModelSpec m = config::model_spec(c);
  for (const auto& o : {training_data_options(c, m), validation_data_options(c, m)}) {
    EXPECT_TRUE(o.mock);
    EXPECT_FALSE(o.split_shares.has_value());
  }
}

}  // namespace
}  // namespace sg::train
