// train/checkpointing.h's resume_data_position, without a run: a data position that the loader refuses (counts
// that do not add up, as a damaged or hand-edited train_state.json of the self-checksum-less version 1 can hold)
// is an error naming that file and the way on, not the loader's bare message.
#include "train/checkpointing.h"

#include <gtest/gtest.h>

#include <string>

#include "data/blended_dataset.h"
#include "test_util.h"

namespace sg::train {
namespace {

TEST(ResumeDataPosition, ARefusedPositionNamesTheTrainStateFile) {
  data::DataLoader loader({.mock = true, .seq_length = 16, .vocab_size = 64});
  ASSERT_EQ(loader.num_sources(), 1u);
  LoadedCheckpoint loaded;
  loaded.path = "/runs/ckpt/iter_0000002";
  loaded.position = {.consumed_samples = 16, .per_source = {17}};
  const std::string message = test::thrown_message([&] { resume_data_position(loaded, loader); });
  EXPECT_NE(message.find("/runs/ckpt/iter_0000002/train_state.json: data position is inconsistent: per-source "
                         "counts sum to 17 but consumed_samples is 16"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find("checkpoint.pretrained_checkpoint=/runs/ckpt/iter_0000002"), std::string::npos) << message;
  loaded.position = {.consumed_samples = 16, .per_source = {16}};
  resume_data_position(loaded, loader);  // a consistent one is taken
}

}  // namespace
}  // namespace sg::train
