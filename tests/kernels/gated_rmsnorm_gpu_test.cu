// GPU gated grouped RMSNorm (norm after the gate) forward and backward with a deterministic dweight,
// against reference/gated_rmsnorm on the same bf16-rounded inputs; z and dz are the strided z slice of
// in_proj rows. Cases and tolerances: gated_rmsnorm_case.h. Outputs and scratch are poisoned before every
// run; a second eager run, a CUDA-graph replay and the in-place dy == dout run are bitwise identical.
#include <gtest/gtest.h>

#include <vector>

#include "core/strings.h"
#include "cuda/stream.h"
#include "gpu_test_util.h"
#include "kernel_gpu_test_util.h"
#include "kernels/gated_rmsnorm.h"
#include "kernels/gated_rmsnorm_case.h"

namespace {

using namespace sg;
using namespace sg::test;

const GatedNormShape kShapes[] = {
    {1, 64, 1, 64, 0},
    {3, 128, 2, 392, 0},       // a tiny in_proj row [z 128 | xBC 256 | dt 8]
    {257, 256, 4, 256, 0},     // more tokens than partial rows
    {7, 120, 3, 130, 5},       // group size 40, stride % 8 != 0: scalar path
    {5, 36, 3, 36, 0},         // group size 12: scalar path
    {4096, 2048, 8, 6176, 0},  // small_hybrid (B * S = 2 * 2048)
    {3, 8192, 8, 18560, 0},    // Nemotron-H 8B's d_inner 8192 (group size 1024) in its in_proj row
    {2, 16384, 1, 16384, 0},   // one group over 16384 columns: backward shared memory above 48 KiB
};

class GatedRmsNormGpu : public ::testing::TestWithParam<GatedNormShape> {};

TEST_P(GatedRmsNormGpu, ForwardAndBackwardMatchReferenceAndAreDeterministic) {
  const GatedNormCase c = make_gated_norm_case(GetParam());
  const GatedNormShape& s = c.s;
  ASSERT_EQ(c.scratch_bytes(),
            static_cast<size_t>(kernels::gated_rmsnorm_backward_num_partials(s.T) * s.D) * sizeof(float));
  DeviceBuffer<bf16> d_y(s.T * s.D), d_z(s.T * s.stride), d_w(s.D), d_out(s.T * s.D), d_dout(s.T * s.D),
      d_dy(s.T * s.D), d_dz(s.T * s.stride);
  DeviceBuffer<float> d_rstd(s.T * s.G), d_dw(s.D), d_scratch(c.scratch_bytes() / sizeof(float));
  d_y.upload(c.y);
  d_z.upload(c.z_rows);
  d_w.upload(c.weight);
  auto prepare = [&] {
    d_out.poison();
    d_rstd.poison();
    d_dy.poison();
    d_dz.upload(c.dz_poisoned);
    d_dout.upload(c.dout);
    d_dw.upload(c.dweight0);
    d_scratch.poison();
    sync_device();
  };
  // dy_target: d_dy, or d_dout for the in-place run.
  auto enqueue_with = [&](cudaStream_t st, bf16* dy_target) {
    kernels::gated_rmsnorm_forward(st, c.forward(d_out.get(), d_rstd.get(), d_y.get(), d_z.get(), d_w.get()));
    kernels::gated_rmsnorm_backward(st, c.backward(dy_target, d_dz.get(), d_dw.get(), d_scratch.get(), d_dout.get(),
                                                   d_y.get(), d_z.get(), d_w.get(), d_rstd.get()));
  };
  auto enqueue = [&](cudaStream_t st) { enqueue_with(st, d_dy.get()); };
  auto snapshot = [&] {
    return Snapshot{named_bytes("out", d_out.download()), named_bytes("rstd", d_rstd.download()),
                    named_bytes("dy", d_dy.download()), named_bytes("dz", d_dz.download()),
                    named_bytes("dweight", d_dw.download())};
  };
  cuda::Stream stream;
  prepare();
  enqueue(stream);
  sync_device();
  const Snapshot first = snapshot();
  const auto dy = d_dy.download(), dz = d_dz.download();
  const auto dw = d_dw.download();
  expect_gated_norm_results(c, d_out.download(), d_rstd.download(), dy, dz, dw);
  expect_bitwise_repeatable(stream, prepare, enqueue, snapshot, first);
  // In place: dy written over dout.
  prepare();
  enqueue_with(stream, d_dout.get());
  sync_device();
  EXPECT_TRUE(bitwise_equal(d_dout.download(), dy)) << "in-place dy == dout differs";
  EXPECT_TRUE(bitwise_equal(d_dz.download(), dz)) << "in-place dy == dout changed dz";
  EXPECT_TRUE(bitwise_equal(d_dw.download(), dw)) << "in-place dy == dout changed dweight";
}

INSTANTIATE_TEST_SUITE_P(Shapes, GatedRmsNormGpu, ::testing::ValuesIn(kShapes), [](const auto& info) {
  const GatedNormShape& s = info.param;
  return strprintf("T%lld_D%lld_G%lld_stride%lld_at%lld", static_cast<long long>(s.T), static_cast<long long>(s.D),
                   static_cast<long long>(s.G), static_cast<long long>(s.stride), static_cast<long long>(s.offset));
});

TEST(GatedRmsNormGpuMisc, RejectsBadGroupsAndSmallScratch) {
  DeviceBuffer<bf16> d_a(4 * 64);
  DeviceBuffer<float> d_f(4 * 64), d_scratch(8);
  cuda::Stream stream;
  kernels::GatedRmsNormForwardParams f{.out = d_a.get(), .rstd = d_f.get(), .y = d_a.get(), .z = d_a.get(),
                                       .weight = d_a.get(), .T = 4, .D = 64, .G = 3};
  EXPECT_NE(thrown_message([&] { kernels::gated_rmsnorm_forward(stream, f); }).find("mamba_num_groups"),
            std::string::npos);
  kernels::GatedRmsNormBackwardParams b{.dy = d_a.get(), .dz = d_a.get(), .dweight = d_f.get(),
                                        .scratch = d_scratch.get(), .scratch_bytes = 8 * sizeof(float),
                                        .dout = d_a.get(), .y = d_a.get(), .z = d_a.get(), .weight = d_a.get(),
                                        .rstd = d_f.get(), .T = 4, .D = 64, .G = 2};
  EXPECT_NE(thrown_message([&] { kernels::gated_rmsnorm_backward(stream, b); }).find("scratch"), std::string::npos);
}

}  // namespace
