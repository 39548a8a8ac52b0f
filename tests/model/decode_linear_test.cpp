// Which path a decoding layer's linear takes (model/decode_linear.h), without a GPU: the matrix-vector kernel for
// up to 8 rows of a shape it takes under tensor_cores (the default; past 4 on the tensor cores) and up to
// kDecodeGemvMaxRows under 1, cuBLASLt otherwise, under each STEPGRAPH_DECODE_GEMV mode (this test runs with the
// variable unset);
// the activation's widths; the kernel's parameters.
#include "model/decode_linear.h"

#include <gtest/gtest.h>

namespace sg::model {
namespace {

TEST(DecodeLinear, TheKernelTakesAStepsRowsAndCublasltTheRest) {
  ASSERT_EQ(decode_gemv_mode(), DecodeGemv::tensor_cores);
  const DecodeLinear by_default(2048, 6144);
  for (int64_t T = 1; T <= kernels::kDecodeLinearMaxRows; ++T) EXPECT_FALSE(by_default.runs_gemm(T)) << "T=" << T;
  EXPECT_TRUE(by_default.runs_gemm(kernels::kDecodeLinearMaxRows + 1));
  EXPECT_TRUE(by_default.runs_gemm(128));            // a prompt
  EXPECT_TRUE(DecodeLinear(1001, 64).runs_gemm(1));  // K not a multiple of 8: no 16-byte rows
  const DecodeLinear plain(2048, 6144, std::nullopt, DecodeGemv::fp32);
  for (int64_t T = 1; T <= kDecodeGemvMaxRows; ++T) EXPECT_FALSE(plain.runs_gemm(T)) << "T=" << T;
  EXPECT_TRUE(plain.runs_gemm(kDecodeGemvMaxRows + 1));
  EXPECT_EQ(plain.kernel_params(kDecodeGemvMaxRows, nullptr, nullptr, nullptr).tensor_cores, false);
  EXPECT_EQ(plain.out_width(), 6144);
  const DecodeLinear gated(2048, 11264, MlpActivation::swiglu);
  EXPECT_EQ(gated.out_width(), 5632);
  EXPECT_EQ(gated.weight_rows(), 11264);
  EXPECT_FALSE(gated.runs_gemm(1));
  EXPECT_EQ(DecodeLinear(1024, 2816, MlpActivation::squared_relu).out_width(), 2816);
  const kernels::DecodeLinearParams p = gated.kernel_params(3, nullptr, nullptr, nullptr);
  EXPECT_EQ(p.T, 3);
  EXPECT_EQ(p.K, 2048);
  EXPECT_EQ(p.N, 11264);
  EXPECT_EQ(p.epilogue, kernels::DecodeLinearEpilogue::kSwiglu);
  EXPECT_FALSE(p.tensor_cores);
}

TEST(DecodeLinear, OffRunsCublasltAndTensorCoresTakesStepsOfUpToEightRows) {
  const DecodeLinear off(2048, 6144, std::nullopt, DecodeGemv::off);
  for (int64_t T : {1, 4, 8}) EXPECT_TRUE(off.runs_gemm(T)) << "T=" << T;
  const DecodeLinear tc(2048, 6144, std::nullopt, DecodeGemv::tensor_cores);
  for (int64_t T = 1; T <= kernels::kDecodeLinearMaxRows; ++T) {
    EXPECT_FALSE(tc.runs_gemm(T)) << "T=" << T;
    // The fp32 math up to its rows, the tensor cores past them.
    EXPECT_EQ(tc.kernel_params(T, nullptr, nullptr, nullptr).tensor_cores, T > kDecodeGemvMaxRows) << "T=" << T;
  }
  EXPECT_TRUE(tc.runs_gemm(kernels::kDecodeLinearMaxRows + 1));
  EXPECT_TRUE(DecodeLinear(1001, 64, std::nullopt, DecodeGemv::tensor_cores).runs_gemm(8));
}

}  // namespace
}  // namespace sg::model
