// train/run_plan.h's batch line: the run's total token count, with separators, and in scientific notation where
// steps x tokens per step passes int64 (it printed a negative count). Its graph line: the graphs the run creates.
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

// The plan's graph line counts the graphs the run creates: with two microbatches each graphed backward
// region is two graphs (the first microbatch's and the rest's), as GraphModesGpu.EveryModeIsBitwiseEqualToEager
// finds live on the GPU (24 for attn,mlp on tiny). It once said 16, counting one microbatch.
TEST(RunPlan, TheGraphLineCountsEveryMicrobatchVariant) {
  const auto line = [](const std::string& global_batch) {
    return describe_graph_plan(
        config::load_config("tiny", {"model.cuda_graph_impl=transformer_engine", "model.cuda_graph_scope=attn,mlp",
                                     "train.global_batch_size=" + global_batch}));
  };
  // The stack is 8 layers (4 attention, 4 MLP); micro batch 4 of a global 8: two microbatches.
  const std::string two = line("8");
  EXPECT_NE(two.find("transformer_engine [attn, mlp]: 24 region graphs (16 regions, the 8 backward ones twice: 2 "
                     "microbatches), 8 graphable layers of 8"),
            std::string::npos)
      << two;
  const std::string one = line("4");
  EXPECT_NE(one.find("transformer_engine [attn, mlp]: 16 region graphs, 8 graphable layers of 8"), std::string::npos)
      << one;
}

}  // namespace
}  // namespace sg::train
