// Plan-time validation of the grouped GEMM plans (kernels/grouped_gemm.h): bad dimensions are refused
// with a message naming the op, the dims and the fix, before any device is touched (so this runs on CI
// without a GPU). The kernels themselves are tested in grouped_gemm_gpu_test.cu.
#include "kernels/grouped_gemm.h"

#include <gtest/gtest.h>

#include <string>

#include "test_util.h"

namespace sg {
namespace {

using kernels::GroupedGemmDims;

std::string plan_error(const GroupedGemmDims& dims) {
  return test::thrown_message([&] { kernels::GroupedLinearForward plan(dims); });
}

TEST(GroupedGemmPlanValidation, RefusesUnalignedFeatureDims) {
  const std::string message = plan_error({.num_groups = 8, .max_total_rows = 128, .N = 136, .K = 100});
  EXPECT_NE(message.find("grouped GEMM forward (groups=8 rows=128 N=136 K=100)"), std::string::npos) << message;
  EXPECT_NE(message.find("multiples of 8"), std::string::npos) << message;
  EXPECT_NE(message.find("pad"), std::string::npos) << message;
  EXPECT_NE(plan_error({.num_groups = 8, .max_total_rows = 128, .N = 130, .K = 128}).find("multiples of 8"),
            std::string::npos);
}

TEST(GroupedGemmPlanValidation, RefusesEmptyOrOversizedShapes) {
  EXPECT_NE(plan_error({.num_groups = 0, .max_total_rows = 128, .N = 64, .K = 64}).find("num_groups"),
            std::string::npos);
  EXPECT_NE(plan_error({.num_groups = 4, .max_total_rows = 0, .N = 64, .K = 64}).find("max_total_rows"),
            std::string::npos);
  EXPECT_NE(plan_error({.num_groups = 4, .max_total_rows = int64_t{1} << 31, .N = 64, .K = 64}).find("int32"),
            std::string::npos);
  EXPECT_NE(plan_error({.num_groups = 4, .max_total_rows = 64, .N = 0, .K = 64}).find("N and K"), std::string::npos);
}

// A forced weight-gradient tile on another op is a mistake, not something to ignore.
TEST(GroupedGemmPlanValidation, RefusesAWeightGradTileOnOtherOps) {
  const std::string message = plan_error(
      {.num_groups = 4, .max_total_rows = 64, .N = 64, .K = 64, .weight_grad_tile = kernels::WeightGradTile::kNarrow});
  EXPECT_NE(message.find("grouped GEMM forward"), std::string::npos) << message;
  EXPECT_NE(message.find("weight_grad_tile = 128x96"), std::string::npos) << message;
  EXPECT_NE(message.find("leave it kAuto"), std::string::npos) << message;
}

// The MoE layer relies on the default (main_grad accumulates across microbatches); overwrite is opt-in.
TEST(GroupedGemmPlanValidation, BackwardWeightAccumulatesByDefault) {
  const kernels::GroupedLinearBackwardWeightParams defaults{};
  EXPECT_TRUE(defaults.accumulate);
}

TEST(GroupedGemmPlanValidation, OpNames) {
  EXPECT_STREQ(kernels::grouped_gemm_op_name(kernels::GroupedGemmOp::kForward), "forward");
  EXPECT_STREQ(kernels::grouped_gemm_op_name(kernels::GroupedGemmOp::kBackwardInput), "backward_input");
  EXPECT_STREQ(kernels::grouped_gemm_op_name(kernels::GroupedGemmOp::kBackwardWeight), "backward_weight");
}

}  // namespace
}  // namespace sg
