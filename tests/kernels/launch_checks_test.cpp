// Host-side launcher checks (no GPU needed): the 16-byte vector-path test, row strides (0 = packed) and
// the stride / scratch errors that name the launcher, the value and the planner to call.
#include "kernels/launch_checks.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "test_util.h"

namespace sg {
namespace {

using kernels::detail::bf16_vector_path_ok;

TEST(LaunchChecks, VectorPathNeedsWidthStridesAndPointersAligned) {
  alignas(16) static unsigned char buf[64];
  const void* aligned = buf;
  const void* misaligned = buf + 2;  // one bf16 further
  EXPECT_TRUE(bf16_vector_path_ok(64, {6176, 64}, {aligned, nullptr}));
  EXPECT_FALSE(bf16_vector_path_ok(36, {64}, {aligned})) << "width % 8 != 0";
  EXPECT_FALSE(bf16_vector_path_ok(64, {64, 50}, {aligned})) << "a stride % 8 != 0";
  EXPECT_FALSE(bf16_vector_path_ok(64, {64}, {aligned, misaligned})) << "a pointer not 16-byte aligned";
}

TEST(LaunchChecks, StrideAndScratchErrorsNameTheFix) {
  const std::string stride_msg =
      test::thrown_message([] { kernels::detail::resolve_row_stride("my_op", "z_row_stride", 100, 128); });
  EXPECT_NE(stride_msg.find("my_op"), std::string::npos) << stride_msg;
  EXPECT_NE(stride_msg.find("z_row_stride = 100"), std::string::npos) << stride_msg;
  EXPECT_EQ(kernels::detail::resolve_row_stride("my_op", "z_row_stride", 0, 128), 128) << "0 means packed";
  EXPECT_EQ(kernels::detail::resolve_row_stride("my_op", "z_row_stride", 6176, 128), 6176);

  float scratch[4];
  const std::string scratch_msg = test::thrown_message(
      [&] { kernels::detail::check_scratch("my_op", scratch, 16, 64, "T=4 H=4", "my_op_scratch_bytes(T, H)"); });
  EXPECT_NE(scratch_msg.find("my_op_scratch_bytes(T, H) = 64 bytes"), std::string::npos) << scratch_msg;
  EXPECT_NE(scratch_msg.find("T=4 H=4"), std::string::npos) << scratch_msg;
  EXPECT_THROW(kernels::detail::check_scratch("my_op", nullptr, 64, 64, "", "f"), Error);
  EXPECT_NO_THROW(kernels::detail::check_scratch("my_op", scratch, 64, 64, "", "f"));
}

}  // namespace
}  // namespace sg
