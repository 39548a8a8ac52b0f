// kernels/swiglu_gemm_rule.h on any machine: the shapes the fused SwiGLU backward GEMM supports, and the
// environment variable that overrides the rule (an unknown value is an error naming the variable and the
// accepted values; 0 and a machine without an sm_90 GPU say no). Where the rule says yes on an H200 is checked by
// the GPU test (tests/kernels/swiglu_backward_gemm_gpu_test.cu).
#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "cuda/device.h"
#include "kernels/swiglu_backward_gemm.h"
#include "test_util.h"

namespace {

using namespace sg;
using sg::test::ScopedEnv;

TEST(SwiGluGemmRule, SupportsWholeSixteenByteRowsOnly) {
  EXPECT_TRUE(kernels::swiglu_gemm_shape_supported(8192, 768, 2048));
  EXPECT_TRUE(kernels::swiglu_gemm_shape_supported(1, 8, 8));
  EXPECT_FALSE(kernels::swiglu_gemm_shape_supported(0, 768, 2048)) << "no tokens";
  EXPECT_FALSE(kernels::swiglu_gemm_shape_supported(64, 100, 64)) << "H not a multiple of 8";
  EXPECT_FALSE(kernels::swiglu_gemm_shape_supported(64, 64, 36)) << "F not a multiple of 8";
  EXPECT_FALSE(kernels::swiglu_gemm_shape_supported(64, 64, int64_t{1} << 31)) << "2F beyond int";
}

TEST(SwiGluGemmRule, TheVariableIsParsedAndAnUnknownValueNamesIt) {
  const char* variable = kernels::kSwiGluBackwardGemmVariable;
  const ScopedEnv env(variable, "0");
  EXPECT_FALSE(kernels::swiglu_backward_gemm_preferred(8192, 768, 2048)) << "0 = never";
  setenv(variable, "yes", 1);
  try {
    kernels::swiglu_backward_gemm_preferred(8192, 768, 2048);
    ADD_FAILURE() << "an unknown value must be an error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(std::string(variable) + "='yes'"), std::string::npos) << what;
    EXPECT_NE(what.find("always"), std::string::npos) << "the accepted values: " << what;
  }
}

TEST(SwiGluGemmRule, NoSm90GpuMeansNoFusedKernelEvenWhenForced) {
  if (cuda::device_count() > 0 && cuda::device_properties().compute_capability() == 90) {
    GTEST_SKIP() << "an sm_90 GPU is present: tests/kernels/swiglu_backward_gemm_gpu_test.cu covers it";
  }
  const ScopedEnv env(kernels::kSwiGluBackwardGemmVariable, "always");
  EXPECT_FALSE(kernels::swiglu_backward_gemm_preferred(8192, 768, 2048));
  EXPECT_THROW(kernels::SwiGluBackwardGemm(8192, 768, 2048), Error) << "planning one needs the GPU";
}

}  // namespace
