// The RMSNorm forward kernels (src/kernels/rmsnorm_forward.cuh: warp per row for vector rows up to 2048
// columns, block per row for wider rows and the scalar path) run on the CPU by tests/simt_emulator.h with
// the launcher's own checks and launch sequence, against the fp32 twin (reference/rmsnorm).
// Tolerances as the GPU test: bf16 outputs relative error < kBf16RelTol (1e-2), rstd < kFp32RelTol
// (1e-5); residual_out bitwise bf16(residual_in + delta). Outputs start poisoned (NaN); a second run, the
// in-place residual (residual_out == residual_in) and the plain forward on the stored residual (the
// recompute path) give the same bits. Small shapes: the emulator is slow.
#define SG_SIMT_EMULATION 1
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/strings.h"
#include "gpu_test_util.h"  // bf16 conversions only: nothing here touches a GPU
#include "kernel_gpu_test_util.h"
#include "kernels/rmsnorm_forward.cuh"
#include "reference/rmsnorm.h"
#include "test_util.h"

namespace sg {
namespace {

namespace fwd = kernels::rmsnorm_fwd;

constexpr float kEps = 1e-5f;

struct ForwardShape {
  int64_t T, H;
  bool warp_per_row;  // the layout the launcher must pick (vector path, aligned buffers)
  bool skewed = false;
};

const ForwardShape kShapes[] = {
    {1, 64, true},           // one vector for 8 of 32 lanes
    {9, 768, true},          // small: 3 vectors per lane; 9 rows = a full block and one row of the next
    {3, 2048, false},        // 1b: block per row (wider than a warp row)
    {10, 1000, true},        // 125 vectors: the 4-vector kernel with idle lanes
    {5, 1536, false},        // block per row, vectors
    {17, 256, true},         // tiny: one vector per lane
    {4, 1024, true},         // 4 vectors per lane, the widest warp row
    {8, 512, true, true},    // 2 vectors per lane, rows over six decades of magnitude
    {2, 1032, false},        // just wider than a warp row: block per row, vectors
    {3, 100, false},         // H % 8 != 0: block per row, scalars
    {2, 1030, false, true},  // scalars, threads loop twice (512 threads)
};

std::vector<float> row_inputs(const ForwardShape& s, uint64_t seed, float stddev) {
  auto x = test::random_normal(s.T * s.H, seed, stddev);
  if (s.skewed) {
    for (int64_t t = 0; t < s.T; ++t) {
      const float scale = std::pow(10.0f, static_cast<float>(t % 7) - 3.0f);
      for (int64_t h = 0; h < s.H; ++h) x[t * s.H + h] *= scale;
    }
  }
  return test::round_bf16(x);
}

std::vector<float> weights(int64_t H, uint64_t seed) {
  auto w = test::random_normal(H, seed, 0.2f);
  for (auto& v : w) v += 1.0f;
  return test::round_bf16(w);
}

class RmsNormForwardEmulated : public ::testing::TestWithParam<ForwardShape> {};

TEST_P(RmsNormForwardEmulated, PlainMatchesReferenceAndIsDeterministic) {
  const ForwardShape s = GetParam();
  ASSERT_EQ(fwd::warp_per_row(s.H, s.H % 8 == 0), s.warp_per_row);
  const auto x = row_inputs(s, 100 + s.T + s.H, 2.0f);
  const auto w = weights(s.H, 200 + s.H);
  std::vector<float> out_ref(s.T * s.H), rstd_ref(s.T);
  ref::rmsnorm_forward(out_ref.data(), rstd_ref.data(), x.data(), w.data(), s.T, s.H, kEps);

  const auto xb = test::to_bf16(x), wb = test::to_bf16(w);
  auto run = [&](std::vector<bf16>& out, std::vector<float>& rstd) {
    out = test::to_bf16(std::vector<float>(s.T * s.H, NAN));
    rstd.assign(s.T, NAN);
    fwd::run_rmsnorm_forward(emu::Launch{}, {out.data(), rstd.data(), xb.data(), wb.data(), s.T, s.H, kEps});
  };
  std::vector<bf16> out, out2;
  std::vector<float> rstd, rstd2;
  run(out, rstd);
  EXPECT_LT(test::relative_error(test::to_float(out), out_ref), test::kBf16RelTol);
  EXPECT_LT(test::relative_error(rstd, rstd_ref), test::kFp32RelTol);
  run(out2, rstd2);
  EXPECT_TRUE(test::bitwise_equal(out2, out)) << "out differs run to run";
  EXPECT_TRUE(test::bitwise_equal(rstd2, rstd)) << "rstd differs run to run";
}

TEST_P(RmsNormForwardEmulated, ResidualAddAndNormMatchesReference) {
  const ForwardShape s = GetParam();
  const int64_t n = s.T * s.H;
  const auto res = row_inputs(s, 300 + s.T + s.H, 3.0f);
  const auto delta = test::round_bf16(test::random_normal(n, 400 + s.T + s.H));
  const auto w = weights(s.H, 500 + s.H);
  std::vector<float> sum(n);
  for (int64_t i = 0; i < n; ++i) sum[i] = res[i] + delta[i];
  const auto sum_bf16 = test::to_bf16(sum);  // what the kernel must store, bit for bit
  std::vector<float> norm_ref(n), rstd_ref(s.T);
  const auto stored = test::to_float(sum_bf16);  // the norm is of the stored (rounded) residual
  ref::rmsnorm_forward(norm_ref.data(), rstd_ref.data(), stored.data(), w.data(), s.T, s.H, kEps);

  const auto resb = test::to_bf16(res), deltab = test::to_bf16(delta), wb = test::to_bf16(w);
  std::vector<bf16> res_out = test::to_bf16(std::vector<float>(n, NAN)), norm = res_out;
  std::vector<float> rstd(s.T, NAN);
  fwd::run_residual_rmsnorm_forward(
      emu::Launch{}, {res_out.data(), norm.data(), rstd.data(), resb.data(), deltab.data(), wb.data(), s.T, s.H, kEps});
  EXPECT_TRUE(test::bitwise_equal(res_out, sum_bf16)) << "residual_out != bf16(residual_in + delta)";
  EXPECT_LT(test::relative_error(test::to_float(norm), norm_ref), test::kBf16RelTol);
  EXPECT_LT(test::relative_error(rstd, rstd_ref), test::kFp32RelTol);

  // The recompute path (model/train_step_run.cpp) re-derives norm and rstd with the plain forward on the
  // stored residual: it must give the fused kernel's bits.
  std::vector<bf16> recomputed = test::to_bf16(std::vector<float>(n, NAN));
  std::vector<float> rstd_recomputed(s.T, NAN);
  fwd::run_rmsnorm_forward(emu::Launch{},
                           {recomputed.data(), rstd_recomputed.data(), res_out.data(), wb.data(), s.T, s.H, kEps});
  EXPECT_TRUE(test::bitwise_equal(recomputed, norm)) << "plain forward on residual_out != fused norm_out";
  EXPECT_TRUE(test::bitwise_equal(rstd_recomputed, rstd)) << "plain forward's rstd != fused rstd";

  // In place on the residual stream: the same bits.
  std::vector<bf16> stream = resb, norm2 = test::to_bf16(std::vector<float>(n, NAN));
  std::vector<float> rstd2(s.T, NAN);
  fwd::run_residual_rmsnorm_forward(emu::Launch{}, {stream.data(), norm2.data(), rstd2.data(), stream.data(),
                                                    deltab.data(), wb.data(), s.T, s.H, kEps});
  EXPECT_TRUE(test::bitwise_equal(stream, sum_bf16));
  EXPECT_TRUE(test::bitwise_equal(norm2, norm));
  EXPECT_TRUE(test::bitwise_equal(rstd2, rstd));
}

INSTANTIATE_TEST_SUITE_P(Shapes, RmsNormForwardEmulated, ::testing::ValuesIn(kShapes), [](const auto& info) {
  return strprintf("T%lld_H%lld%s", static_cast<long long>(info.param.T), static_cast<long long>(info.param.H),
                   info.param.skewed ? "_skewed" : "");
});

// 16-byte-misaligned pointers with H % 8 == 0 (a width the warp rows take when aligned) use the scalar
// block path and give the reference's answer.
TEST(RmsNormForwardEmulatedMisc, MisalignedPointersUseScalarPath) {
  const int64_t T = 3, H = 256;
  const auto x = test::round_bf16(test::random_normal(T * H, 11));
  const auto w = weights(H, 12);
  std::vector<float> out_ref(T * H), rstd_ref(T);
  ref::rmsnorm_forward(out_ref.data(), rstd_ref.data(), x.data(), w.data(), T, H, kEps);
  std::vector<float> x_shift(T * H + 1, 0.0f), w_shift(H + 1, 0.0f);
  std::copy(x.begin(), x.end(), x_shift.begin() + 1);
  std::copy(w.begin(), w.end(), w_shift.begin() + 1);
  const auto xb = test::to_bf16(x_shift), wb = test::to_bf16(w_shift);
  std::vector<bf16> out = test::to_bf16(std::vector<float>(T * H + 1, NAN));
  std::vector<float> rstd(T, NAN);
  fwd::run_rmsnorm_forward(emu::Launch{}, {out.data() + 1, rstd.data(), xb.data() + 1, wb.data() + 1, T, H, kEps});
  out.erase(out.begin());
  EXPECT_LT(test::relative_error(test::to_float(out), out_ref), test::kBf16RelTol);
  EXPECT_LT(test::relative_error(rstd, rstd_ref), test::kFp32RelTol);
}

TEST(RmsNormForwardEmulatedMisc, ZeroRowsWriteNothingAndBadShapesThrow) {
  std::vector<bf16> buf = test::to_bf16(std::vector<float>(8, 1.0f)), out = buf;
  float rstd = 7.0f;
  fwd::run_rmsnorm_forward(emu::Launch{}, {out.data(), &rstd, buf.data(), buf.data(), 0, 8, kEps});
  EXPECT_TRUE(test::bitwise_equal(out, buf));
  EXPECT_EQ(rstd, 7.0f);
  const std::string msg = test::thrown_message([&] {
    fwd::run_rmsnorm_forward(emu::Launch{}, {out.data(), &rstd, buf.data(), buf.data(), 1, 0, kEps});
  });
  EXPECT_NE(msg.find("H = 0"), std::string::npos) << msg;
}

}  // namespace
}  // namespace sg
