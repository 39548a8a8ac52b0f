// GPU RMSNorm (forward, fused residual add + norm, backward with deterministic dweight) against
// reference/rmsnorm on the same bf16-rounded inputs.
// Tolerances: bf16 outputs (out, norm_out, din) relative error < kBf16RelTol (1e-2) vs the fp32
// reference; fp32 outputs computed from identical inputs < kFp32RelTol (1e-5): dweight norm-wise, rstd in every row.
// The forward inputs hold rows with mean(x^2) near eps (where eps moves rstd by 1.4x) and, on skewed shapes,
// the backward's row and column scales (rmsnorm_case.h).
// residual_out of the fused kernel must be bitwise bf16(residual_in + delta), and the plain forward on it
// (the recompute path) must give the fused norm_out and rstd bit for bit. Outputs and the dweight
// scratch are poisoned (NaN) before each run; runs repeat bitwise identically (the backward also in a
// CUDA-graph replay). The backward's cases and checks: rmsnorm_case.h (shared with the CPU-emulated test).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "core/strings.h"
#include "cuda/stream.h"
#include "gpu_test_util.h"
#include "kernel_gpu_test_util.h"
#include "kernels/rmsnorm.h"
#include "kernels/rmsnorm_case.h"
#include "reference/rmsnorm.h"

namespace {

using namespace sg;
using namespace sg::test;

constexpr float kEps = 1e-5f;

// Non-multiples of the vector width (100, 770: the scalar path), of the row group (257 rows, 2056), the
// small and 1b shapes (8192 x 768, 8192 x 2048), more rows than one pass of the backward's row groups
// (4099 x 770), the widest row group (12800: 13 warps x 4 vectors), skewed magnitudes (rmsnorm_case.h).
// Forward layouts (rmsnorm_forward.cuh): warp per row up to H = 1024 (1 to 4 vectors per lane: 64, 256,
// 768, 1024; rows not a multiple of the block's 8: 1, 7, 13, 257, 4100), block per row above (1032, 1536,
// 2048, 2056, 12800) and on the scalar path (100, 770).
const RmsNormShape kShapes[] = {{1, 64},          {1, 768},     {7, 100},    {257, 256},
                                {1000, 768},      {3, 2056},    {8192, 768}, {8192, 2048},
                                {4099, 770},      {5, 12800},   {2200, 64},  {4096, 1024, true},
                                {513, 770, true}, {1001, 1536}, {13, 1032},  {4100, 768, true}};

void sync() {
  SG_CUDA_CHECK(cudaDeviceSynchronize());
}

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

// N(0, stddev^2) rows of a forward input, every 4th (t % 4 == 3) scaled by `eps_row_scale`, which callers pick to
// put mean(x^2) near eps there (with eps dropped, rstd moves 1.4x; with inputs ~N(0, 4) alone, by 1e-6). Skewed
// shapes add rmsnorm_case.h's scales: rows over six decades (1e-3 .. 1e3), every 37th column 30x.
std::vector<float> forward_input(const RmsNormShape& s, uint64_t seed, float stddev, float eps_row_scale) {
  auto x = random_normal(s.T * s.H, seed, stddev);
  for (int64_t t = 0; t < s.T; ++t) {
    const float row_scale =
        (t % 4 == 3 ? eps_row_scale : 1.0f) * (s.skewed ? std::pow(10.0f, static_cast<float>(t % 7) - 3.0f) : 1.0f);
    for (int64_t h = 0; h < s.H; ++h) x[t * s.H + h] *= row_scale * (s.skewed && h % 37 == 0 ? 30.0f : 1.0f);
  }
  return round_bf16(x);
}

std::vector<float> weights(int64_t H, uint64_t seed) {
  auto w = random_normal(H, seed, 0.2f);
  for (auto& x : w) x += 1.0f;
  return round_bf16(w);
}

class RmsNormGpu : public ::testing::TestWithParam<RmsNormShape> {};

TEST_P(RmsNormGpu, ForwardMatchesReference) {
  const int64_t T = GetParam().T, H = GetParam().H;
  const auto x = forward_input(GetParam(), 1000 + T + H, 2.0f, 1.5e-3f);  // near-eps rows: mean(x^2) = 9e-6
  const auto w = weights(H, 2000 + H);
  std::vector<float> out_ref(T * H), rstd_ref(T);
  ref::rmsnorm_forward(out_ref.data(), rstd_ref.data(), x.data(), w.data(), T, H, kEps);

  DeviceBuffer<bf16> d_x(T * H), d_w(H), d_out(T * H);
  DeviceBuffer<float> d_rstd(T);
  d_x.upload(to_bf16(x));
  d_w.upload(to_bf16(w));
  d_out.poison();
  d_rstd.poison();
  sync();
  cuda::Stream stream;
  kernels::rmsnorm_forward(
      stream,
      {.out = d_out.get(), .rstd = d_rstd.get(), .in = d_x.get(), .weight = d_w.get(), .T = T, .H = H, .eps = kEps});
  sync();
  const auto out = d_out.download();
  EXPECT_LT(relative_error(to_float(out), out_ref), kBf16RelTol) << "T=" << T << " H=" << H;
  EXPECT_LT(max_relative_error(d_rstd.download(), rstd_ref), kFp32RelTol) << "T=" << T << " H=" << H;

  d_out.poison();
  sync();
  kernels::rmsnorm_forward(
      stream,
      {.out = d_out.get(), .rstd = d_rstd.get(), .in = d_x.get(), .weight = d_w.get(), .T = T, .H = H, .eps = kEps});
  sync();
  EXPECT_TRUE(same_bits(d_out.download(), out)) << "second run differs";
}

TEST_P(RmsNormGpu, ResidualAddAndNormMatchesReference) {
  const int64_t T = GetParam().T, H = GetParam().H;
  // Near-eps rows: the sum ~N(0, 10) scaled 1e-3, mean(sum^2) = 1e-5.
  const auto res = forward_input(GetParam(), 3000 + T + H, 3.0f, 1e-3f);
  const auto delta = forward_input(GetParam(), 4000 + T + H, 1.0f, 1e-3f);
  const auto w = weights(H, 5000 + H);
  std::vector<float> sum(T * H);
  for (int64_t i = 0; i < T * H; ++i) sum[i] = res[i] + delta[i];
  const auto sum_bf16 = to_bf16(sum);  // what the kernel must store, bit for bit

  DeviceBuffer<bf16> d_res(T * H), d_delta(T * H), d_w(H), d_res_out(T * H), d_norm(T * H);
  DeviceBuffer<float> d_rstd(T);
  d_res.upload(to_bf16(res));
  d_delta.upload(to_bf16(delta));
  d_w.upload(to_bf16(w));
  d_res_out.poison();
  d_norm.poison();
  d_rstd.poison();
  sync();
  cuda::Stream stream;
  kernels::residual_rmsnorm_forward(stream, {.residual_out = d_res_out.get(),
                                             .norm_out = d_norm.get(),
                                             .rstd = d_rstd.get(),
                                             .residual_in = d_res.get(),
                                             .delta = d_delta.get(),
                                             .weight = d_w.get(),
                                             .T = T,
                                             .H = H,
                                             .eps = kEps});
  sync();
  const auto res_out = d_res_out.download();
  const auto norm = d_norm.download();
  EXPECT_TRUE(same_bits(res_out, sum_bf16)) << "residual_out != bf16(residual_in + delta)";
  // The norm is of the stored (rounded) residual: the reference gets exactly those values.
  const auto stored = to_float(res_out);
  std::vector<float> norm_ref(T * H), rstd_ref(T);
  ref::rmsnorm_forward(norm_ref.data(), rstd_ref.data(), stored.data(), w.data(), T, H, kEps);
  EXPECT_LT(relative_error(to_float(norm), norm_ref), kBf16RelTol);
  EXPECT_LT(max_relative_error(d_rstd.download(), rstd_ref), kFp32RelTol);
  // And against the fp32 add & norm reference as a whole (bf16 tolerance: the sum is rounded).
  std::vector<float> res_ref(T * H), norm_ref32(T * H), rstd_ref32(T);
  ref::residual_rmsnorm_forward(res_ref.data(), norm_ref32.data(), rstd_ref32.data(), res.data(), delta.data(),
                                w.data(), T, H, kEps);
  EXPECT_LT(relative_error(to_float(norm), norm_ref32), kBf16RelTol);

  // The recompute path re-derives norm and rstd with the plain forward on the stored residual: the same bits.
  DeviceBuffer<bf16> d_recomputed(T * H);
  DeviceBuffer<float> d_rstd_recomputed(T);
  d_recomputed.poison();
  d_rstd_recomputed.poison();
  sync();
  kernels::rmsnorm_forward(stream, {.out = d_recomputed.get(),
                                    .rstd = d_rstd_recomputed.get(),
                                    .in = d_res_out.get(),
                                    .weight = d_w.get(),
                                    .T = T,
                                    .H = H,
                                    .eps = kEps});
  sync();
  EXPECT_TRUE(same_bits(d_recomputed.download(), norm)) << "plain forward on residual_out != fused norm_out";
  EXPECT_TRUE(same_bits(d_rstd_recomputed.download(), d_rstd.download())) << "rstd differs from the fused one";

  // In place on the residual stream (residual_out == residual_in): the same bits.
  d_norm.poison();
  sync();
  kernels::residual_rmsnorm_forward(stream, {.residual_out = d_res.get(),
                                             .norm_out = d_norm.get(),
                                             .rstd = d_rstd.get(),
                                             .residual_in = d_res.get(),
                                             .delta = d_delta.get(),
                                             .weight = d_w.get(),
                                             .T = T,
                                             .H = H,
                                             .eps = kEps});
  sync();
  EXPECT_TRUE(same_bits(d_res.download(), sum_bf16));
  EXPECT_TRUE(same_bits(d_norm.download(), norm));
}

TEST_P(RmsNormGpu, BackwardMatchesReferenceAndIsDeterministic) {
  const RmsNormBackwardCase c = make_rmsnorm_backward_case(GetParam());
  const int64_t T = c.s.T, H = c.s.H;
  ASSERT_EQ(c.scratch_bytes(), static_cast<size_t>(kernels::rmsnorm_backward_num_partials(T) * H) * sizeof(float));
  DeviceBuffer<bf16> d_x(T * H), d_w(H), d_dy(T * H), d_dres(T * H), d_din(T * H);
  DeviceBuffer<float> d_rstd(T), d_dw(H), d_scratch(c.scratch_bytes() / sizeof(float));
  d_x.upload(c.x);
  d_w.upload(c.weight);
  d_dy.upload(c.dout);
  d_rstd.upload(c.rstd);  // the same rstd the reference used
  cuda::Stream stream;

  // Poisoned din (unless written in place over dresidual) and scratch, dweight reset to its start values.
  auto prepare = [&](bf16* din) {
    d_dw.upload(c.dweight0);
    if (din != d_dres.get()) d_din.poison();
    d_scratch.poison();
  };
  auto enqueue = [&](const bf16* dresidual, bf16* din) {
    return [&c, &d_dw, &d_scratch, &d_dy, &d_x, &d_w, &d_rstd, dresidual, din](cudaStream_t s) {
      kernels::rmsnorm_backward(
          s, c.backward(din, d_dw.get(), d_scratch.get(), d_dy.get(), d_x.get(), d_w.get(), d_rstd.get(), dresidual));
    };
  };

  prepare(d_din.get());
  enqueue(nullptr, d_din.get())(stream);
  sync();
  const auto din = d_din.download();
  const auto dw = d_dw.download();
  expect_rmsnorm_backward_results(c, din, dw, false);
  // Eager rerun and CUDA-graph replay: the same bits.
  expect_bitwise_repeatable(
      stream, [&] { prepare(d_din.get()); }, enqueue(nullptr, d_din.get()),
      [&] {
        return Snapshot{named_bytes("din", d_din.download()), named_bytes("dweight", d_dw.download())};
      },
      Snapshot{named_bytes("din", din), named_bytes("dweight", dw)});

  // Fused residual-gradient add, into a separate buffer and in place on dresidual.
  d_dres.upload(c.dresidual);
  prepare(d_din.get());
  enqueue(d_dres.get(), d_din.get())(stream);
  sync();
  const auto din_res = d_din.download();
  expect_rmsnorm_backward_results(c, din_res, d_dw.download(), true);
  EXPECT_TRUE(same_bits(d_dw.download(), dw)) << "dresidual must not change dweight";
  prepare(d_dres.get());
  enqueue(d_dres.get(), d_dres.get())(stream);
  sync();
  EXPECT_TRUE(same_bits(d_dres.download(), din_res)) << "in-place din == dresidual differs";
}

INSTANTIATE_TEST_SUITE_P(Shapes, RmsNormGpu, ::testing::ValuesIn(kShapes), [](const auto& info) {
  return strprintf("T%lld_H%lld%s", static_cast<long long>(info.param.T), static_cast<long long>(info.param.H),
                   info.param.skewed ? "_skewed" : "");
});

// T = 0: nothing is launched, dweight keeps its values, and the scratch needs no bytes.
TEST(RmsNormGpuMisc, BackwardWithNoRowsLeavesDweightAlone) {
  const int64_t H = 64;
  const auto dw0 = random_normal(H, 1);
  DeviceBuffer<bf16> d_a(H);
  DeviceBuffer<float> d_dw(H), d_rstd(1);
  d_dw.upload(dw0);
  EXPECT_EQ(kernels::rmsnorm_backward_scratch_bytes(0, H), 0u);
  kernels::RmsNormBackwardParams p{.din = d_a.get(),
                                   .dweight = d_dw.get(),
                                   .scratch = nullptr,
                                   .scratch_bytes = 0,
                                   .dout = d_a.get(),
                                   .in = d_a.get(),
                                   .weight = d_a.get(),
                                   .rstd = d_rstd.get(),
                                   .T = 0,
                                   .H = H};
  cuda::Stream stream;
  kernels::rmsnorm_backward(stream, p);
  sync();
  EXPECT_TRUE(same_bits(d_dw.download(), dw0));
}

// The backward with 16-byte-misaligned pointers (H % 8 == 0): the scalar path, the reference's answer.
TEST(RmsNormGpuMisc, BackwardMisalignedPointersUseScalarPath) {
  const RmsNormBackwardCase c = make_rmsnorm_backward_case({300, 256});
  const int64_t n = c.s.T * c.s.H;
  DeviceBuffer<bf16> d_x(n + 1), d_w(c.s.H + 1), d_dy(n + 1), d_din(n + 1);
  DeviceBuffer<float> d_rstd(c.s.T), d_dw(c.s.H), d_scratch(c.scratch_bytes() / sizeof(float));
  d_x.upload(shifted_by_one(c.x));
  d_w.upload(shifted_by_one(c.weight));
  d_dy.upload(shifted_by_one(c.dout));
  d_rstd.upload(c.rstd);
  d_dw.upload(c.dweight0);
  d_din.poison();
  d_scratch.poison();
  cuda::Stream stream;
  kernels::rmsnorm_backward(stream, c.backward(d_din.get() + 1, d_dw.get(), d_scratch.get(), d_dy.get() + 1,
                                               d_x.get() + 1, d_w.get() + 1, d_rstd.get(), nullptr));
  sync();
  auto din = d_din.download();
  din.erase(din.begin());
  expect_rmsnorm_backward_results(c, din, d_dw.download(), false);
}

// 16-byte-misaligned pointers with H % 8 == 0 take the scalar path and give the same answer.
TEST(RmsNormGpuMisc, MisalignedPointersUseScalarPath) {
  const int64_t T = 9, H = 256;
  const auto x = round_bf16(random_normal(T * H, 11));
  const auto w = weights(H, 12);
  std::vector<float> out_ref(T * H), rstd_ref(T);
  ref::rmsnorm_forward(out_ref.data(), rstd_ref.data(), x.data(), w.data(), T, H, kEps);
  DeviceBuffer<bf16> d_x(T * H + 1), d_w(H + 1), d_out(T * H + 1);
  DeviceBuffer<float> d_rstd(T);
  std::vector<float> x_shift(T * H + 1, 0.0f), w_shift(H + 1, 0.0f);
  std::copy(x.begin(), x.end(), x_shift.begin() + 1);
  std::copy(w.begin(), w.end(), w_shift.begin() + 1);
  d_x.upload(to_bf16(x_shift));
  d_w.upload(to_bf16(w_shift));
  d_out.poison();
  d_rstd.poison();
  sync();
  cuda::Stream stream;
  kernels::rmsnorm_forward(stream, {.out = d_out.get() + 1,
                                    .rstd = d_rstd.get(),
                                    .in = d_x.get() + 1,
                                    .weight = d_w.get() + 1,
                                    .T = T,
                                    .H = H,
                                    .eps = kEps});
  sync();
  auto out = to_float(d_out.download());
  out.erase(out.begin());
  EXPECT_LT(relative_error(out, out_ref), kBf16RelTol);
  EXPECT_LT(relative_error(d_rstd.download(), rstd_ref), kFp32RelTol);
}

TEST(RmsNormGpuMisc, BackwardRejectsSmallScratch) {
  DeviceBuffer<float> d_scratch(16), d_dw(64), d_rstd(4);
  DeviceBuffer<bf16> d_a(4 * 64);
  const kernels::RmsNormBackwardParams p{.din = d_a.get(),
                                         .dweight = d_dw.get(),
                                         .scratch = d_scratch.get(),
                                         .scratch_bytes = 16 * sizeof(float),
                                         .dout = d_a.get(),
                                         .in = d_a.get(),
                                         .weight = d_a.get(),
                                         .rstd = d_rstd.get(),
                                         .T = 4,
                                         .H = 64};
  cuda::Stream stream;
  EXPECT_THROW(kernels::rmsnorm_backward(stream, p), Error);
}

}  // namespace
