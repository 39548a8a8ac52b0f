// GPU gated grouped RMSNorm (norm after the gate) forward and backward with a deterministic dweight,
// against reference/gated_rmsnorm on the same bf16-rounded inputs; z and dz are the strided z slice of
// in_proj rows.
// Tolerances: bf16 outputs (out, dy, dz) relative error < kBf16RelTol (1e-2) vs the fp32 reference; fp32
// outputs from identical inputs (rstd, dweight added into random starting values) < kFp32RelTol (1e-5).
// Outputs and scratch are poisoned before every run, the dz rows hold a sentinel outside the view that
// must survive; a second eager run, a CUDA-graph replay and the in-place dy == dout run are bitwise
// identical.
#include <gtest/gtest.h>

#include <vector>

#include "core/strings.h"
#include "cuda/stream.h"
#include "gpu_test_util.h"
#include "kernels/gated_rmsnorm.h"
#include "reference/gated_rmsnorm.h"
#include "kernel_gpu_test_util.h"

namespace {

using namespace sg;
using namespace sg::test;

constexpr float kEps = 1e-5f;
constexpr float kSentinel = 5.0f;

// T tokens, d_inner D in G groups; z rows of `stride` elements with the D-wide view at column `offset`.
struct Shape {
  int64_t T, D, G, stride, offset;
};
const Shape kShapes[] = {
    {1, 64, 1, 64, 0},
    {3, 128, 2, 392, 0},          // a tiny in_proj row [z 128 | xBC 256 | dt 8]
    {257, 256, 4, 256, 0},        // non-tile-multiple T
    {7, 120, 3, 130, 5},          // group size 40, stride % 8 != 0: scalar path
    {5, 36, 3, 36, 0},            // group size 12: scalar path
    {4096, 2048, 8, 6176, 0},     // small_hybrid (B * S = 2 * 2048)
    {3, 8192, 8, 18560, 0},       // Nemotron-H 8B's d_inner 8192, group size 1024
    {2, 16384, 1, 16384, 0},      // one group over 16384 columns: backward shared memory above 48 KiB
};

class GatedRmsNormGpu : public ::testing::TestWithParam<Shape> {};

TEST_P(GatedRmsNormGpu, ForwardAndBackwardMatchReferenceAndAreDeterministic) {
  const auto [T, D, G, stride, offset] = GetParam();
  const uint64_t seed = static_cast<uint64_t>(T * 7919 + D + G);
  const auto y = round_bf16(random_normal(T * D, seed + 1, 2.0f));
  const auto z_rows = round_bf16(random_normal(T * stride, seed + 2, 2.0f));
  auto w = random_normal(D, seed + 3, 0.2f);
  for (auto& x : w) x += 1.0f;
  w = round_bf16(w);
  const auto dout = round_bf16(random_normal(T * D, seed + 4));
  const auto dw0 = random_normal(D, seed + 5);

  std::vector<float> out_ref(T * D), rstd_ref(T * G), dy_ref(T * D), dz_ref_rows(T * stride, 0.0f), dw_ref = dw0;
  ref::gated_rmsnorm_forward(out_ref.data(), rstd_ref.data(), y.data(), z_rows.data() + offset, stride, w.data(), T, D,
                             G, kEps);
  ref::gated_rmsnorm_backward(dy_ref.data(), dz_ref_rows.data() + offset, stride, dw_ref.data(), dout.data(), y.data(),
                              z_rows.data() + offset, stride, w.data(), rstd_ref.data(), T, D, G);
  const auto dz_ref = view_columns(dz_ref_rows, T, stride, offset, D);

  DeviceBuffer<bf16> d_y(T * D), d_z(T * stride), d_w(D), d_out(T * D), d_dout(T * D), d_dy(T * D), d_dz(T * stride);
  DeviceBuffer<float> d_rstd(T * G), d_dw(D);
  const size_t scratch_bytes = kernels::gated_rmsnorm_backward_scratch_bytes(T, D);
  ASSERT_EQ(scratch_bytes, static_cast<size_t>(kernels::gated_rmsnorm_backward_num_partials(T) * D) * sizeof(float));
  DeviceBuffer<float> d_scratch(scratch_bytes / sizeof(float));
  d_y.upload(to_bf16(y));
  d_z.upload(to_bf16(z_rows));
  d_w.upload(to_bf16(w));
  const auto dout_bf16 = to_bf16(dout);
  const auto dz_poisoned = poisoned_view_rows(T, stride, offset, D, kSentinel);
  auto prepare = [&] {
    d_out.poison();
    d_rstd.poison();
    d_dy.poison();
    d_dz.upload(dz_poisoned);
    d_dout.upload(dout_bf16);
    d_dw.upload(dw0);
    d_scratch.poison();
    sync_device();
  };
  // dy_target: d_dy, or d_dout for the in-place run.
  auto enqueue_with = [&](cudaStream_t s, bf16* dy_target) {
    kernels::gated_rmsnorm_forward(s, {.out = d_out.get(), .rstd = d_rstd.get(), .y = d_y.get(),
                                       .z = d_z.get() + offset, .weight = d_w.get(), .T = T, .D = D, .G = G,
                                       .z_stride = stride, .eps = kEps});
    kernels::gated_rmsnorm_backward(
        s, {.dy = dy_target, .dz = d_dz.get() + offset, .dweight = d_dw.get(), .scratch = d_scratch.get(),
            .scratch_bytes = scratch_bytes, .dout = d_dout.get(), .y = d_y.get(), .z = d_z.get() + offset,
            .weight = d_w.get(), .rstd = d_rstd.get(), .T = T, .D = D, .G = G, .z_stride = stride,
            .dz_stride = stride});
  };
  auto enqueue = [&](cudaStream_t s) { enqueue_with(s, d_dy.get()); };
  auto snapshot = [&] {
    return Snapshot{named_bytes("out", d_out.download()), named_bytes("rstd", d_rstd.download()),
                    named_bytes("dy", d_dy.download()), named_bytes("dz", d_dz.download()),
                    named_bytes("dweight", d_dw.download())};
  };
  cuda::Stream stream;
  prepare();
  enqueue(stream);
  sync_device();
  const auto out = d_out.download();
  const auto rstd = d_rstd.download();
  const auto dy = d_dy.download();
  const auto dz = d_dz.download();
  const auto dw = d_dw.download();
  EXPECT_LT(relative_error(to_float(out), out_ref), kBf16RelTol);
  EXPECT_LT(relative_error(rstd, rstd_ref), kFp32RelTol);
  EXPECT_LT(relative_error(to_float(dy), dy_ref), kBf16RelTol);
  EXPECT_LT(relative_error(to_float(view_columns(dz, T, stride, offset, D)), dz_ref), kBf16RelTol);
  EXPECT_EQ(count_changed_outside_view(dz, T, stride, offset, D, kSentinel), 0) << "dz written outside its view";
  EXPECT_LT(relative_error(dw, dw_ref), kFp32RelTol);
  expect_bitwise_repeatable(stream, prepare, enqueue, snapshot,
                            Snapshot{named_bytes("out", out), named_bytes("rstd", rstd), named_bytes("dy", dy),
                                     named_bytes("dz", dz), named_bytes("dweight", dw)});
  // In place: dy written over dout.
  prepare();
  enqueue_with(stream, d_dout.get());
  sync_device();
  EXPECT_TRUE(bitwise_equal(d_dout.download(), dy)) << "in-place dy == dout differs";
  EXPECT_TRUE(bitwise_equal(d_dz.download(), dz)) << "in-place dy == dout changed dz";
  EXPECT_TRUE(bitwise_equal(d_dw.download(), dw)) << "in-place dy == dout changed dweight";
}

INSTANTIATE_TEST_SUITE_P(Shapes, GatedRmsNormGpu, ::testing::ValuesIn(kShapes), [](const auto& info) {
  const Shape& s = info.param;
  return strprintf("T%lld_D%lld_G%lld_stride%lld_at%lld", static_cast<long long>(s.T), static_cast<long long>(s.D),
                   static_cast<long long>(s.G), static_cast<long long>(s.stride), static_cast<long long>(s.offset));
});

TEST(GatedRmsNormGpuMisc, RejectsBadGroupsAndSmallScratch) {
  DeviceBuffer<bf16> d_a(4 * 64);
  DeviceBuffer<float> d_f(4 * 64), d_scratch(8);
  cuda::Stream stream;
  kernels::GatedRmsNormForwardParams f{.out = d_a.get(), .rstd = d_f.get(), .y = d_a.get(), .z = d_a.get(),
                                       .weight = d_a.get(), .T = 4, .D = 64, .G = 3, .z_stride = 64};
  EXPECT_NE(thrown_message([&] { kernels::gated_rmsnorm_forward(stream, f); }).find("mamba_num_groups"),
            std::string::npos);
  kernels::GatedRmsNormBackwardParams b{.dy = d_a.get(), .dz = d_a.get(), .dweight = d_f.get(),
                                        .scratch = d_scratch.get(), .scratch_bytes = 8 * sizeof(float),
                                        .dout = d_a.get(), .y = d_a.get(), .z = d_a.get(), .weight = d_a.get(),
                                        .rstd = d_f.get(), .T = 4, .D = 64, .G = 2, .z_stride = 64, .dz_stride = 64};
  EXPECT_NE(thrown_message([&] { kernels::gated_rmsnorm_backward(stream, b); }).find("scratch"), std::string::npos);
}

}  // namespace
