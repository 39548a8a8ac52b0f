// Which path a decoding layer's linear takes (model/decode_linear.h), without a GPU: the matrix-vector kernel for
// up to kDecodeGemvMaxRows rows of a shape it takes, cuBLASLt otherwise; the activation's widths; and the
// STEPGRAPH_DECODE_GEMV values (this test runs with the variable unset: the default).
#include "model/decode_linear.h"

#include <gtest/gtest.h>

#include <string>

#include "core/error.h"
#include "test_util.h"

namespace sg::model {
namespace {

TEST(DecodeLinear, TheKernelTakesAStepsRowsAndCublasltTheRest) {
  ASSERT_TRUE(decode_gemv_enabled());
  const DecodeLinear plain(2048, 6144);
  for (int64_t T = 1; T <= kDecodeGemvMaxRows; ++T) EXPECT_FALSE(plain.runs_gemm(T)) << "T=" << T;
  EXPECT_TRUE(plain.runs_gemm(kDecodeGemvMaxRows + 1));
  EXPECT_TRUE(plain.runs_gemm(128));                 // a prompt
  EXPECT_TRUE(DecodeLinear(1001, 64).runs_gemm(1));  // K not a multiple of 8: no 16-byte rows
  EXPECT_EQ(plain.out_width(), 6144);
  const DecodeLinear gated(2048, 11264, MlpActivation::swiglu);
  EXPECT_EQ(gated.out_width(), 5632);
  EXPECT_EQ(gated.weight_rows(), 11264);
  EXPECT_FALSE(gated.runs_gemm(1));
  EXPECT_EQ(DecodeLinear(1024, 2816, MlpActivation::squared_relu).out_width(), 2816);
}

TEST(DecodeLinear, TheSwitchTakesOneOrZeroAndNamesTheVariableOtherwise) {
  EXPECT_TRUE(decode_gemv_setting(nullptr));
  EXPECT_TRUE(decode_gemv_setting("1"));
  EXPECT_FALSE(decode_gemv_setting("0"));
  const std::string message = test::thrown_message([] { decode_gemv_setting("yes"); });
  EXPECT_NE(message.find("STEPGRAPH_DECODE_GEMV='yes'"), std::string::npos) << message;
  EXPECT_NE(message.find("must be 1"), std::string::npos) << message;
}

}  // namespace
}  // namespace sg::model
