// The RMSNorm backward kernels (src/kernels/rmsnorm_backward.cuh: the row-group kernel, then the
// partial-sum column reduction) run on the CPU by tests/simt_emulator.h with the launcher's own checks and
// launch sequence, against the fp32 twin: cases and tolerances of rmsnorm_case.h, as the GPU test. Each
// case runs four times: plain, again (bitwise equal), with the fused dresidual add, and with din written
// in place over dresidual (bitwise equal to the separate buffer). Small shapes: the emulator is slow.
#define SG_SIMT_EMULATION 1
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/error.h"
#include "core/strings.h"
#include "gpu_test_util.h"  // bf16 conversions only: nothing here touches a GPU
#include "kernel_gpu_test_util.h"
#include "kernels/rmsnorm_backward.cuh"
#include "kernels/rmsnorm_case.h"

namespace sg {
namespace {

using test::RmsNormBackwardCase;
using test::RmsNormShape;

namespace bwd = kernels::rmsnorm_bwd;

const RmsNormShape kShapes[] = {
    {1, 64},            // one row, one chunk per lane of one warp
    {7, 100},           // H % 8 != 0: scalar path, 4 chunks per thread
    {5, 770},           // scalar path, 2 warps per row, 16-chunk kernel
    {2200, 64},         // 8 groups x 264 blocks = 2112 rows per pass: a second, partial pass (prefetched)
    {1100, 1536},       // 2 warps per row x 3 chunks, 4 groups: two passes, cross-warp dot, shared sums
    {2500, 768},        // 1 warp x 3 chunks, 8 groups: the dweight sums in shared memory, row prefetched
    {1100, 1024},       // 2 warps per row x 2 chunks (next row prefetched): two passes
    {3, 1032},          // 129 vectors: 5 warps x 1 chunk, one group per block
    {37, 264, true},    // skewed magnitudes
    {3, 8, true},       // skewed, one vector per row, 31 idle lanes
};

class RmsNormBackwardEmulated : public ::testing::TestWithParam<RmsNormShape> {};

TEST_P(RmsNormBackwardEmulated, MatchesReferenceAndIsDeterministic) {
  const RmsNormBackwardCase c = test::make_rmsnorm_backward_case(GetParam());
  const int64_t n = c.s.T * c.s.H;
  ASSERT_EQ(c.scratch_bytes(), static_cast<size_t>(bwd::num_partials(c.s.T) * c.s.H) * sizeof(float));
  const emu::Launch launch;
  std::vector<float> scratch(c.scratch_bytes() / sizeof(float));
  auto run = [&](const bf16* dres, std::vector<bf16>& din, std::vector<float>& dw) {
    dw = c.dweight0;
    std::fill(scratch.begin(), scratch.end(), NAN);
    bwd::run_backward(launch, c.backward(din.data(), dw.data(), scratch.data(), c.dout.data(), c.x.data(),
                                         c.weight.data(), c.rstd.data(), dres));
  };
  const std::vector<bf16> poisoned = test::to_bf16(std::vector<float>(n, NAN));
  std::vector<bf16> din = poisoned, din2 = poisoned;
  std::vector<float> dw, dw2;
  run(nullptr, din, dw);
  test::expect_rmsnorm_backward_results(c, din, dw, false);
  run(nullptr, din2, dw2);
  EXPECT_TRUE(test::bitwise_equal(din2, din)) << "din differs run to run";
  EXPECT_TRUE(test::bitwise_equal(dw2, dw)) << "dweight differs run to run";

  std::vector<bf16> din_res = poisoned;
  run(c.dresidual.data(), din_res, dw2);
  test::expect_rmsnorm_backward_results(c, din_res, dw2, true);
  EXPECT_TRUE(test::bitwise_equal(dw2, dw)) << "dresidual must not change dweight";
  std::vector<bf16> in_place = c.dresidual;
  run(in_place.data(), in_place, dw2);
  EXPECT_TRUE(test::bitwise_equal(in_place, din_res)) << "din written over dresidual differs";
}

INSTANTIATE_TEST_SUITE_P(Shapes, RmsNormBackwardEmulated, ::testing::ValuesIn(kShapes), [](const auto& info) {
  return strprintf("T%lld_H%lld%s", static_cast<long long>(info.param.T), static_cast<long long>(info.param.H),
                   info.param.skewed ? "_skewed" : "");
});

TEST(RmsNormBackwardEmulatedMisc, ZeroRowsLeaveDweightAlone) {
  const std::vector<float> dw0 = {1.0f, -2.0f, 3.0f, 0.5f, 0.25f, 8.0f, -1.0f, 2.0f};
  std::vector<float> dw = dw0;
  std::vector<bf16> buf = test::to_bf16(std::vector<float>(8, 1.0f));
  const float rstd = 1.0f;
  kernels::RmsNormBackwardParams p{.din = buf.data(), .dweight = dw.data(), .scratch = nullptr, .scratch_bytes = 0,
                                   .dout = buf.data(), .in = buf.data(), .weight = buf.data(), .rstd = &rstd,
                                   .T = 0, .H = 8};
  bwd::run_backward(emu::Launch{}, p);
  EXPECT_TRUE(test::bitwise_equal(dw, dw0));
  EXPECT_EQ(kernels::rmsnorm_backward_scratch_bytes(0, 8), 0u);
}

// 16-byte-misaligned pointers with H % 8 == 0 take the scalar path and give the reference's answer.
TEST(RmsNormBackwardEmulatedMisc, MisalignedPointersUseScalarPath) {
  const RmsNormBackwardCase c = test::make_rmsnorm_backward_case({9, 256});
  const int64_t n = c.s.T * c.s.H;
  const auto x = test::shifted_by_one(c.x), w = test::shifted_by_one(c.weight), dy = test::shifted_by_one(c.dout);
  std::vector<bf16> din = test::to_bf16(std::vector<float>(n + 1, NAN));
  std::vector<float> dw = c.dweight0, scratch(c.scratch_bytes() / sizeof(float), NAN);
  bwd::run_backward(emu::Launch{}, c.backward(din.data() + 1, dw.data(), scratch.data(), dy.data() + 1, x.data() + 1,
                                              w.data() + 1, c.rstd.data(), nullptr));
  din.erase(din.begin());
  test::expect_rmsnorm_backward_results(c, din, dw, false);
}

TEST(RmsNormBackwardEmulatedMisc, RejectsSmallScratchAndTooWideRows) {
  const RmsNormBackwardCase c = test::make_rmsnorm_backward_case({4, 64});
  std::vector<bf16> din(c.x.size());
  std::vector<float> dw = c.dweight0, scratch(c.scratch_bytes() / sizeof(float));
  auto p = c.backward(din.data(), dw.data(), scratch.data(), c.dout.data(), c.x.data(), c.weight.data(),
                      c.rstd.data(), nullptr);
  p.scratch_bytes -= sizeof(float);
  const std::string msg = test::thrown_message([&] { bwd::run_backward(emu::Launch{}, p); });
  EXPECT_NE(msg.find("rmsnorm_backward_scratch_bytes"), std::string::npos) << msg;

  // Rows wider than one 16-warp group can hold in registers: a clear error, not a wrong answer.
  for (const int64_t H : {int64_t{16392}, int64_t{8193}}) {
    std::vector<bf16> row(H);
    std::vector<float> w32(H), big_scratch(H);
    const float rstd = 1.0f;
    kernels::RmsNormBackwardParams wide{.din = row.data(), .dweight = w32.data(), .scratch = big_scratch.data(),
                                        .scratch_bytes = big_scratch.size() * sizeof(float), .dout = row.data(),
                                        .in = row.data(), .weight = row.data(), .rstd = &rstd, .T = 1, .H = H};
    const std::string wide_msg = test::thrown_message([&] { bwd::run_backward(emu::Launch{}, wide); });
    EXPECT_NE(wide_msg.find("wider than"), std::string::npos) << "H=" << H << ": " << wide_msg;
  }
  // Planning sizes the scratch first, so a model that wide fails at plan time (validate, train's setup),
  // not at its first backward.
  EXPECT_NE(test::thrown_message([] { kernels::rmsnorm_backward_scratch_bytes(8, 20480); }).find("wider than"),
            std::string::npos);
  EXPECT_GT(kernels::rmsnorm_backward_scratch_bytes(8, 16384), 0u);
}

// kernels/shape_limits.h's widest row (what `stepgraph validate` checks hidden_size against) is exactly what
// the row-group arithmetic handles, on both paths.
TEST(RmsNormBackwardEmulatedMisc, TheShapeLimitIsTheWidestRowGroup) {
  for (const bool vec : {true, false}) {
    SCOPED_TRACE(vec ? "vector path" : "scalar path");
    const int64_t widest = kernels::rmsnorm_backward_max_width(vec);
    const bwd::BackwardShape s = bwd::backward_shape(widest, vec);
    EXPECT_EQ(s.warps_per_row, bwd::kMaxBlockThreads / 32);
    EXPECT_EQ(s.chunks, vec ? bwd::kMaxVecChunks : bwd::kMaxScalarChunks);
    const int64_t wider = widest + (vec ? 8 : 1);
    const std::string msg = test::thrown_message([&] { (void)bwd::backward_shape(wider, vec); });
    EXPECT_NE(msg.find(kernels::rmsnorm_backward_width_problem(wider, vec)), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace sg
