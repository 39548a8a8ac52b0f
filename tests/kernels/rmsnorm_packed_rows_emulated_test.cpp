// RMSNorm over packed rows (packed rows: qk_layernorm's heads inside the qkv projection), forward and
// backward kernels run on the CPU by tests/simt_emulator.h with the launchers' own checks and launch
// sequences, against the fp32 twin on the gathered rows: cases, tolerances and checks of
// rmsnorm_packed_rows_case.h, as the GPU test. Outputs start poisoned (NaN); each direction also runs in place.
#define SG_SIMT_EMULATION 1
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "gpu_test_util.h"  // bf16 conversions only: nothing here touches a GPU
#include "kernel_gpu_test_util.h"
#include "kernels/rmsnorm_backward.cuh"
#include "kernels/rmsnorm_forward.cuh"
#include "kernels/rmsnorm_packed_rows_case.h"

namespace sg {
namespace {

using test::PackedRowsCase;
using test::PackedRowsShape;

class RmsNormPackedRowsEmulated : public ::testing::TestWithParam<PackedRowsShape> {};

TEST_P(RmsNormPackedRowsEmulated, ForwardMatchesReferenceOnlyInItsRows) {
  const PackedRowsCase c = test::make_packed_rows_case(GetParam());
  const std::vector<bf16> poisoned = test::to_bf16(std::vector<float>(c.elements(), NAN));
  std::vector<bf16> out = poisoned;
  std::vector<float> rstd = c.rstd_buffer();
  kernels::rmsnorm_fwd::run_rmsnorm_forward(emu::Launch{},
                                            c.forward(out.data(), rstd.data(), c.x.data(), c.weight.data()));
  test::expect_packed_forward(c, out, rstd, poisoned);

  std::vector<bf16> in_place = c.x;
  std::vector<float> rstd2 = c.rstd_buffer();
  kernels::rmsnorm_fwd::run_rmsnorm_forward(emu::Launch{},
                                            c.forward(in_place.data(), rstd2.data(), in_place.data(), c.weight.data()));
  EXPECT_TRUE(test::bitwise_equal(c.gather(in_place), c.gather(out))) << "in place differs";
  EXPECT_TRUE(c.same_outside_rows(in_place, c.x)) << "in place wrote outside its rows";
  EXPECT_TRUE(test::bitwise_equal(rstd2, rstd));
}

TEST_P(RmsNormPackedRowsEmulated, BackwardMatchesReferenceOnlyInItsRows) {
  const PackedRowsCase c = test::make_packed_rows_case(GetParam());
  const std::vector<float> rstd_in = c.rstd_input();
  const std::vector<bf16> poisoned = test::to_bf16(std::vector<float>(c.elements(), NAN));
  std::vector<float> scratch(c.scratch_bytes() / sizeof(float), NAN);
  std::vector<bf16> din = poisoned;
  std::vector<float> dw = c.dweight0;
  kernels::rmsnorm_bwd::run_backward(emu::Launch{}, c.backward(din.data(), dw.data(), scratch.data(), c.dout.data(),
                                                               c.x.data(), c.weight.data(), rstd_in.data()));
  test::expect_packed_backward(c, din, dw, poisoned);

  std::vector<bf16> in_place = c.dout;  // din over dout, as the attention layer runs it
  std::vector<float> dw2 = c.dweight0;
  std::fill(scratch.begin(), scratch.end(), NAN);
  kernels::rmsnorm_bwd::run_backward(
      emu::Launch{}, c.backward(in_place.data(), dw2.data(), scratch.data(), in_place.data(), c.x.data(),
                                c.weight.data(), rstd_in.data()));
  EXPECT_TRUE(test::bitwise_equal(c.gather(in_place), c.gather(din))) << "in place differs";
  EXPECT_TRUE(c.same_outside_rows(in_place, c.dout)) << "in place wrote outside its rows";
  EXPECT_TRUE(test::bitwise_equal(dw2, dw));
}

INSTANTIATE_TEST_SUITE_P(Shapes, RmsNormPackedRowsEmulated, ::testing::ValuesIn(test::packed_rows_shapes()),
                         [](const auto& info) { return test::packed_rows_name(info.param); });

// A layout whose groups would overlap, or rows that are not whole groups: a clear error.
TEST(RmsNormPackedRowsEmulatedMisc, RejectsOverlappingGroupsAndPartialGroups) {
  const PackedRowsCase c = test::make_packed_rows_case({2, 4, 64, 512, 0});
  std::vector<bf16> out(c.elements());
  std::vector<float> rstd = c.rstd_buffer();
  auto p = c.forward(out.data(), rstd.data(), c.x.data(), c.weight.data());
  p.group_stride = 4 * 64 - 8;
  std::string msg = test::thrown_message([&] { kernels::rmsnorm_fwd::run_rmsnorm_forward(emu::Launch{}, p); });
  EXPECT_NE(msg.find("group_stride = 248"), std::string::npos) << msg;
  p = c.forward(out.data(), rstd.data(), c.x.data(), c.weight.data());
  p.T = 7;
  msg = test::thrown_message([&] { kernels::rmsnorm_fwd::run_rmsnorm_forward(emu::Launch{}, p); });
  EXPECT_NE(msg.find("not whole groups"), std::string::npos) << msg;
  std::vector<float> dw = c.dweight0, scratch(c.scratch_bytes() / sizeof(float));
  const std::vector<float> rstd_in = c.rstd_input();
  auto b =
      c.backward(out.data(), dw.data(), scratch.data(), c.dout.data(), c.x.data(), c.weight.data(), rstd_in.data());
  b.rows_per_group = 3;
  msg = test::thrown_message([&] { kernels::rmsnorm_bwd::run_backward(emu::Launch{}, b); });
  EXPECT_NE(msg.find("rmsnorm_backward: T = 8 rows are not whole groups"), std::string::npos) << msg;
}

}  // namespace
}  // namespace sg
