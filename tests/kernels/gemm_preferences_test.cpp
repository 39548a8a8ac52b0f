// kernels/gemm_preferences.h on any machine: which GEMMs the measured table names a configuration for (the bench
// recipes' shapes as the linear helpers describe them, on Hopper only), and the environment variable that turns it
// off (an unknown value is an error naming the variable and the accepted values). That the plan runs the named
// configuration on an H200 is checked by the GPU test (tests/kernels/gemm_gpu_test.cu).
#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "kernels/gemm.h"
#include "kernels/gemm_preferences.h"
#include "test_util.h"

namespace {

using namespace sg;
using sg::test::ScopedEnv;

TEST(GemmPreferences, NamesAConfigurationForMeasuredShapesOnHopperOnly) {
  const ScopedEnv env(kernels::kGemmPreferencesVariable, nullptr);
  const kernels::GemmDesc fc1_1b = kernels::linear_forward_desc(8192, 2048, 11264);
  const auto config = kernels::preferred_gemm_config(fc1_1b, 90);
  ASSERT_TRUE(config.has_value()) << "llama/1b's fc1 forward is in the table";
  EXPECT_GT(config->tile_id, 0);
  EXPECT_GT(config->cluster_id, 0);
  EXPECT_FALSE(kernels::preferred_gemm_config(fc1_1b, 100).has_value()) << "measured on Hopper, not elsewhere";
  EXPECT_TRUE(kernels::preferred_gemm_config(kernels::linear_forward_desc(4096, 768, 32768), 90).has_value())
      << "llama/small's LM-head forward (a chunk of 4096 rows)";
  EXPECT_TRUE(kernels::preferred_gemm_config(kernels::linear_backward_weight_desc(8192, 5632, 2048), 90).has_value())
      << "llama/1b's fc2 weight gradient (fp32 D)";
  // Into bf16 main gradients it is another GEMM, measured on its own (s23c4): another entry, another tile.
  const auto fc2_wgrad_bf16 = kernels::preferred_gemm_config(
      kernels::linear_backward_weight_desc(8192, 5632, 2048, kernels::FloatDtype::bf16), 90);
  const auto fc2_wgrad_fp32 = kernels::preferred_gemm_config(kernels::linear_backward_weight_desc(8192, 5632, 2048), 90);
  ASSERT_TRUE(fc2_wgrad_bf16.has_value() && fc2_wgrad_fp32.has_value()) << "llama/1b's fc2 weight gradient, both D types";
  EXPECT_NE(fc2_wgrad_bf16->cluster_id, fc2_wgrad_fp32->cluster_id);
  EXPECT_FALSE(kernels::preferred_gemm_config(
                   kernels::linear_backward_weight_desc(8192, 2048, 2048, kernels::FloatDtype::bf16), 90)
                   .has_value())
      << "1b's output projection weight gradient into bf16: its best candidate gained under 1%, not taken";
  EXPECT_TRUE(kernels::preferred_gemm_config(kernels::linear_backward_input_desc(8192, 2048, 11264), 90).has_value())
      << "llama/1b's fc1 input gradient";
  // llama/tiny's output projection: forward and input gradient have the same m, n, k and differ in A's transpose.
  const auto o_forward = kernels::preferred_gemm_config(kernels::linear_forward_desc(1024, 256, 256), 90);
  const auto o_input_grad = kernels::preferred_gemm_config(kernels::linear_backward_input_desc(1024, 256, 256), 90);
  ASSERT_TRUE(o_forward.has_value() && o_input_grad.has_value()) << "llama/tiny's output projection";
  EXPECT_NE(o_forward->tile_id, o_input_grad->tile_id) << "two table entries, one per transpose";
}

TEST(GemmPreferences, OtherShapesAndEpiloguesKeepTheHeuristicsChoice) {
  const ScopedEnv env(kernels::kGemmPreferencesVariable, nullptr);
  EXPECT_FALSE(kernels::preferred_gemm_config(kernels::linear_forward_desc(8192, 2048, 2048), 90).has_value())
      << "1b's output projection forward: no candidate beat the first choice in every round";
  EXPECT_FALSE(kernels::preferred_gemm_config(kernels::linear_backward_weight_desc(8192, 768, 2304), 90).has_value())
      << "small's QKV weight gradient: no candidate beat the first choice in every round";
  EXPECT_FALSE(kernels::preferred_gemm_config(kernels::linear_forward_desc(1024, 256, 1408), 90).has_value())
      << "tiny's fc1 forward: no candidate beat the first choice";
  EXPECT_FALSE(kernels::preferred_gemm_config(kernels::linear_forward_desc(8191, 2048, 11264), 90).has_value())
      << "another token count";
  EXPECT_FALSE(kernels::preferred_gemm_config(kernels::linear_forward_desc(8192, 2048, 11264, true), 90).has_value())
      << "the bias epilogue was not measured";
  // The same m, n, k with fp32 D is another GEMM (the forward writes bf16).
  kernels::GemmDesc fp32_out = kernels::linear_forward_desc(8192, 2048, 11264);
  fp32_out.d_type = kernels::GemmDtype::kFP32;
  EXPECT_FALSE(kernels::preferred_gemm_config(fp32_out, 90).has_value());
}

TEST(GemmPreferences, TheVariableTurnsTheTableOffAndAnUnknownValueNamesIt) {
  const kernels::GemmDesc fc1_1b = kernels::linear_forward_desc(8192, 2048, 11264);
  const char* variable = kernels::kGemmPreferencesVariable;
  const ScopedEnv env(variable, "0");
  EXPECT_FALSE(kernels::preferred_gemm_config(fc1_1b, 90).has_value()) << "0 = the heuristic's first choice";
  setenv(variable, "1", 1);
  EXPECT_TRUE(kernels::preferred_gemm_config(fc1_1b, 90).has_value());
  setenv(variable, "fast", 1);
  try {
    kernels::preferred_gemm_config(fc1_1b, 90);
    ADD_FAILURE() << "an unknown value must be an error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(std::string(variable) + "='fast'"), std::string::npos) << what;
    EXPECT_NE(what.find("must be 1"), std::string::npos) << "the accepted values: " << what;
  }
}

}  // namespace
