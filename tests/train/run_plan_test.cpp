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

// The plan without a device is one rank's arena at a data-parallel size above 1 (its shard of the fp32 state
// under the distributed optimizer: smaller than the unsharded plan), and it names the workspaces only the
// device sizes, the Mamba2 layers' among them.
TEST(RunPlan, TheMemoryPlanIsOneRanksAndNamesWhatTheDeviceSizes) {
  const auto plan = [](const std::string& recipe, int64_t ranks, bool sharded) {
    config::Config c = config::load_config(
        recipe, {"train.global_batch_size=32",
                 sharded ? "optimizer.use_distributed_optimizer=true" : "optimizer.use_distributed_optimizer=false"});
    c.data_parallel_size = ranks;
    return describe_gpu_memory_plan(c);
  };
  const auto total = [](const std::string& text) {
    const size_t colon = text.find("): ");
    return text.substr(colon + 3, text.find('\n') - colon - 3);
  };
  const std::string one = plan("tiny", 1, false), whole = plan("tiny", 4, false), sharded = plan("tiny", 4, true);
  EXPECT_EQ(one.find("data-parallel"), std::string::npos) << one;
  EXPECT_NE(whole.find("each of the 4 data-parallel ranks)"), std::string::npos) << whole;
  EXPECT_NE(sharded.find("each of the 4 data-parallel ranks, holding its shard of the fp32 weights and moments"),
            std::string::npos)
      << sharded;
  EXPECT_NE(total(sharded), total(whole)) << sharded << "\n" << whole;
  EXPECT_EQ(one.find("Mamba2"), std::string::npos) << one;
  const std::string hybrid = plan("tiny_hybrid", 1, false);
  EXPECT_NE(hybrid.find("the Mamba2 layers' SSD scan and partial-sum workspaces (sized on the GPU)"), std::string::npos)
      << hybrid;
}

}  // namespace
}  // namespace sg::train
