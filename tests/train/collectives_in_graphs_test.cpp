// Which CUDA graphs of a data-parallel run hold a collective (train/gpu_backend.h), the question the
// NCCL_GRAPH_REGISTER rule is applied to where the reducer is built. transformer_engine with evaluation once
// logged "no collective is captured in a graph" while its evaluation graph captured the loss all-reduce.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "config/config.h"
#include "train/evaluation.h"
#include "train/gpu_backend.h"

namespace sg::train {
namespace {

config::Config tiny(const std::string& impl, bool evaluation) {
  std::vector<std::string> overrides = {"model.cuda_graph_impl=" + impl};
  if (impl == "transformer_engine") overrides.emplace_back("model.cuda_graph_scope=attn,mlp");
  if (evaluation) overrides.emplace_back("train.eval_interval=10");
  return config::load_config("tiny", overrides);
}

TEST(CollectivesInGraphs, TheEvaluationGraphHoldsTheLossAllReduceInEveryGraphMode) {
  // transformer_engine: the step's collectives run eagerly between region replays, but the evaluation is
  // one graph of its own that ends with the loss all-reduce.
  EXPECT_TRUE(collectives_captured_in_graphs(tiny("transformer_engine", true)));
  EXPECT_FALSE(collectives_captured_in_graphs(tiny("transformer_engine", false)));
  // local: the whole step's graph holds the gradient reduction, evaluation or not.
  EXPECT_TRUE(collectives_captured_in_graphs(tiny("local", false)));
  EXPECT_TRUE(collectives_captured_in_graphs(tiny("local", true)));
  // none: nothing is captured, the evaluation runs eagerly too.
  EXPECT_FALSE(collectives_captured_in_graphs(tiny("none", false)));
  EXPECT_FALSE(collectives_captured_in_graphs(tiny("none", true)));
}

// The evaluation graph follows the trainer's decision that evaluation is on (evaluation_enabled).
TEST(CollectivesInGraphs, TheEvaluationGraphFollowsTheTrainersEvaluationDecision) {
  for (const char* impl : {"none", "local", "transformer_engine"}) {
    SCOPED_TRACE(impl);
    EXPECT_FALSE(evaluation_enabled(tiny(impl, false)));
    EXPECT_TRUE(evaluation_enabled(tiny(impl, true)));
    EXPECT_FALSE(evaluation_graphed(tiny(impl, false)));
    EXPECT_EQ(evaluation_graphed(tiny(impl, true)), std::string(impl) != "none");
  }
}

}  // namespace
}  // namespace sg::train
