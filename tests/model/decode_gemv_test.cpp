// The STEPGRAPH_DECODE_GEMV switch (model/decode_gemv.h), without a GPU: its three values and the error for any
// other, the rows each mode gives the kernel, a decoder's own mode against the process's (this test runs with the
// variable unset: the default), and the description the decoder prints.
#include "model/decode_gemv.h"

#include <gtest/gtest.h>

#include <string>

#include "kernels/decode_linear.h"
#include "test_util.h"

namespace sg::model {
namespace {

TEST(DecodeGemv, TheSwitchTakesItsThreeValuesAndNamesTheVariableOtherwise) {
  EXPECT_EQ(decode_gemv_setting(nullptr), DecodeGemv::tensor_cores);
  EXPECT_EQ(decode_gemv_setting("1"), DecodeGemv::fp32);
  EXPECT_EQ(decode_gemv_setting("0"), DecodeGemv::off);
  EXPECT_EQ(decode_gemv_setting("tensor_cores"), DecodeGemv::tensor_cores);
  for (const DecodeGemv mode : {DecodeGemv::off, DecodeGemv::fp32, DecodeGemv::tensor_cores}) {
    EXPECT_EQ(decode_gemv_setting(decode_gemv_value(mode)), mode);
    const std::string described = describe_decode_gemv(mode);
    EXPECT_NE(described.find(std::string("STEPGRAPH_DECODE_GEMV=") + decode_gemv_value(mode) + ")"), std::string::npos)
        << described;
  }
  EXPECT_NE(describe_decode_gemv(DecodeGemv::fp32).find("up to 4 rows"), std::string::npos);
  EXPECT_NE(describe_decode_gemv(DecodeGemv::tensor_cores).find("up to 8 rows"), std::string::npos);
  EXPECT_NE(describe_decode_gemv(DecodeGemv::off).find("cuBLASLt"), std::string::npos);
  for (const char* bad : {"yes", "2", "tensor-cores", ""}) {
    const std::string message = test::thrown_message([&] { decode_gemv_setting(bad); });
    EXPECT_NE(message.find(std::string("STEPGRAPH_DECODE_GEMV='") + bad + "'"), std::string::npos) << message;
    EXPECT_NE(message.find("must be tensor_cores (the default"), std::string::npos) << message;
    EXPECT_NE(message.find("tensor_cores"), std::string::npos) << message;
  }
}

TEST(DecodeGemv, EachModesRowsAndADecodersModeOverTheProcesss) {
  EXPECT_EQ(decode_gemv_max_rows(DecodeGemv::off), 0);
  EXPECT_EQ(decode_gemv_max_rows(DecodeGemv::fp32), kDecodeGemvMaxRows);
  EXPECT_EQ(decode_gemv_max_rows(DecodeGemv::tensor_cores), kernels::kDecodeLinearMaxRows);
  ASSERT_EQ(decode_gemv_mode(), DecodeGemv::tensor_cores);
  EXPECT_EQ(decode_gemv_mode(DecodeGemv::off), DecodeGemv::off);
  EXPECT_EQ(decode_gemv_mode(DecodeGemv::tensor_cores), DecodeGemv::tensor_cores);
  EXPECT_EQ(decode_gemv_mode(std::nullopt), DecodeGemv::tensor_cores);
  EXPECT_EQ(decode_gemv_mode(DecodeGemv::fp32), DecodeGemv::fp32);
}

}  // namespace
}  // namespace sg::model
