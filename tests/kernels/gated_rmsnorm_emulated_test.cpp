// The gated grouped RMSNorm kernels (src/kernels/gated_rmsnorm.cuh), run on the CPU by
// tests/simt_emulator.h with the launchers' own checks and launch sequence (backward kernel, then the
// partial-sum reduction), against the fp32 twin: cases and tolerances as the GPU test
// (gated_rmsnorm_case.h), plus the in-place dy == dout run. Small shapes: the emulator is slow.
#define SG_SIMT_EMULATION 1
#include <gtest/gtest.h>

#include <vector>

#include "core/strings.h"
#include "gpu_test_util.h"  // bf16 conversions only: nothing here touches a GPU
#include "kernels/gated_rmsnorm.cuh"
#include "kernels/gated_rmsnorm_case.h"
#include "test_util.h"

namespace sg {
namespace {

using test::GatedNormCase;
using test::GatedNormShape;

const GatedNormShape kShapes[] = {
    {1, 64, 1, 64, 0},       // packed, vector path
    {3, 128, 2, 392, 0},     // a tiny in_proj row [z 128 | xBC 256 | dt 8]
    {7, 120, 3, 130, 5},     // group size 40, stride % 8 != 0: scalar path
    {5, 36, 3, 36, 0},       // group size 12: scalar path
    {260, 16, 2, 24, 8},     // more tokens than the 256 partial rows, group size 8
    {2, 4096, 2, 4096, 0},   // group size 2048: every thread walks several vectors
};

class GatedRmsNormEmulated : public ::testing::TestWithParam<GatedNormShape> {};

TEST_P(GatedRmsNormEmulated, ForwardAndBackwardMatchReference) {
  const GatedNormCase c = test::make_gated_norm_case(GetParam());
  const GatedNormShape& s = c.s;
  std::vector<bf16> out = test::to_bf16(std::vector<float>(s.T * s.D, NAN)), dy = out, dz = c.dz_poisoned;
  std::vector<float> rstd(s.T * s.G, NAN), dw = c.dweight0, scratch(c.scratch_bytes() / sizeof(float), NAN);
  const emu::Launch launch;
  kernels::gated_norm::run_forward(launch, c.forward(out.data(), rstd.data(), c.y.data(), c.z_rows.data(),
                                                     c.weight.data()));
  kernels::gated_norm::run_backward(launch, c.backward(dy.data(), dz.data(), dw.data(), scratch.data(), c.dout.data(),
                                                       c.y.data(), c.z_rows.data(), c.weight.data(), rstd.data()));
  test::expect_gated_norm_results(c, out, rstd, dy, dz, dw);

  // In place: dy written over dout gives the same bits.
  std::vector<bf16> dout_inplace = c.dout, dz2 = c.dz_poisoned;
  std::vector<float> dw2 = c.dweight0;
  kernels::gated_norm::run_backward(launch,
                                    c.backward(dout_inplace.data(), dz2.data(), dw2.data(), scratch.data(),
                                               dout_inplace.data(), c.y.data(), c.z_rows.data(), c.weight.data(),
                                               rstd.data()));
  EXPECT_TRUE(test::bitwise_equal(dout_inplace, dy));
  EXPECT_TRUE(test::bitwise_equal(dz2, dz));
  EXPECT_TRUE(test::bitwise_equal(dw2, dw));
}

INSTANTIATE_TEST_SUITE_P(Shapes, GatedRmsNormEmulated, ::testing::ValuesIn(kShapes), [](const auto& info) {
  const GatedNormShape& s = info.param;
  return strprintf("T%lld_D%lld_G%lld_stride%lld_at%lld", static_cast<long long>(s.T), static_cast<long long>(s.D),
                   static_cast<long long>(s.G), static_cast<long long>(s.stride), static_cast<long long>(s.offset));
});

// Groups wider than 58080 columns need more shared memory in the backward than an sm_90 block may opt into: the
// scratch planning (the model's plan) and the launcher refuse them, naming the groups, not the runtime's
// "invalid argument" at the first backward. The forward has no such limit.
TEST(GatedRmsNormEmulatedMisc, GroupsPastTheSharedMemoryLimitAreRefused) {
  const std::string plan = test::thrown_message([] { kernels::gated_rmsnorm_backward_scratch_bytes(4, 65536, 1); });
  EXPECT_NE(plan.find("gated_rmsnorm_backward_scratch_bytes: d_inner 65536 in 1 groups"), std::string::npos) << plan;
  EXPECT_NE(plan.find("at most 58080 columns"), std::string::npos) << plan;
  EXPECT_NE(plan.find("use more groups"), std::string::npos) << plan;
  EXPECT_GT(kernels::gated_rmsnorm_backward_scratch_bytes(4, 65536, 2), 0u);
  EXPECT_GT(kernels::gated_rmsnorm_backward_scratch_bytes(4, 58080, 1), 0u);
  EXPECT_NE(test::thrown_message([] {
              kernels::gated_rmsnorm_backward_scratch_bytes(4, 58081, 1);
            }).find("a group of 58081 columns"),
            std::string::npos);

  // The launcher's own check, before any launch (the emulator would run it otherwise).
  const int64_t D = 58088;
  std::vector<bf16> row(D);
  std::vector<float> dw(D), scratch(D);
  const float rstd = 1.0f;
  const kernels::GatedRmsNormBackwardParams p{.dy = row.data(),
                                              .dz = row.data(),
                                              .dweight = dw.data(),
                                              .scratch = scratch.data(),
                                              .scratch_bytes = scratch.size() * sizeof(float),
                                              .dout = row.data(),
                                              .y = row.data(),
                                              .z = row.data(),
                                              .weight = row.data(),
                                              .rstd = &rstd,
                                              .T = 1,
                                              .D = D,
                                              .G = 1};
  const std::string launch = test::thrown_message([&] { kernels::gated_norm::run_backward(emu::Launch{}, p); });
  EXPECT_NE(launch.find("gated_rmsnorm_backward: d_inner 58088 in 1 groups"), std::string::npos) << launch;
  EXPECT_NE(launch.find("at most 58080 columns"), std::string::npos) << launch;
}

}  // namespace
}  // namespace sg
