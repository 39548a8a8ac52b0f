// train/run_plan.h's batch line: the run's total token count, with separators, and in scientific notation where
// steps x tokens per step passes int64 (it printed a negative count).
#include "train/run_plan.h"

#include <gtest/gtest.h>

#include <string>

#include "config/config.h"

namespace sg::train {
namespace {

TEST(RunPlan, TheBatchLineCountsTheRunsTokensWithoutOverflow) {
  const std::string plain = describe_batch(config::load_config("tiny", {"train.train_iters=1000"}));
  EXPECT_NE(plain.find("1000 steps = 1,024,000 tokens"), std::string::npos) << plain;
  const std::string huge = describe_batch(config::load_config(
      "tiny", {"train.train_iters=2147483647", "train.micro_batch_size=1", "train.global_batch_size=2147483647"}));
  EXPECT_NE(huge.find("2147483647 steps = 1.18e+21 tokens"), std::string::npos) << huge;
  EXPECT_EQ(huge.find("= -"), std::string::npos) << huge;
}

}  // namespace
}  // namespace sg::train
