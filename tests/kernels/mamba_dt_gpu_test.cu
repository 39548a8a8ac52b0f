// GPU dt = clamp(softplus(dt_raw + dt_bias)) and A = -exp(A_log), forward and backward, against
// reference/mamba_dt on the same bf16-rounded inputs; dt_raw and its gradient are the strided dt slice of
// in_proj rows. Cases and tolerances: mamba_dt_case.h (A, dA_log: fp32, < kFp32RelTol). Outputs are
// poisoned before every run; a second eager run and a CUDA-graph replay are bitwise identical.
#include <gtest/gtest.h>

#include <vector>

#include "core/strings.h"
#include "cuda/stream.h"
#include "gpu_test_util.h"
#include "kernel_gpu_test_util.h"
#include "kernels/mamba_dt.h"
#include "kernels/mamba_dt_case.h"
#include "reference/mamba_dt.h"

namespace {

using namespace sg;
using namespace sg::test;

const DtShape kShapes[] = {
    {1, 1, 1, 0},
    {3, 8, 392, 384},                   // a tiny in_proj row [z 128 | xBC 256 | dt 8]
    {257, 33, 40, 7},                   // more heads than a block's 32, odd offset
    {1000, 5, 5, 0, 0.05f, 1.0f},       // packed, clipped on both sides
    {8192, 32, 6176, 6144},             // small_hybrid: B * S = 4 * 2048 tokens, dt at the row's end
    {4099, 128, 130, 1, 0.001f, 0.1f},  // Nemotron-H 8B's 128 heads, Megatron's dt range as a limit
};

class MambaDtGpu : public ::testing::TestWithParam<DtShape> {};

TEST_P(MambaDtGpu, ForwardAndBackwardMatchReferenceAndAreDeterministic) {
  const DtCase c = make_dt_case(GetParam());
  const DtShape& s = c.s;
  DeviceBuffer<bf16> d_rows(s.T * s.stride), d_draw(s.T * s.stride);
  DeviceBuffer<float> d_bias(s.H), d_dt(s.T * s.H), d_ddt(s.T * s.H), d_dbias(s.H);
  DeviceBuffer<float> d_scratch(c.scratch_bytes() / sizeof(float));
  d_rows.upload(c.rows);
  d_bias.upload(c.bias);
  d_ddt.upload(c.ddt);
  auto prepare = [&] {
    d_dt.poison();
    d_draw.upload(c.draw_poisoned);
    d_dbias.upload(c.dbias0);
    d_scratch.poison();
    sync_device();
  };
  auto enqueue = [&](cudaStream_t st) {
    kernels::mamba_dt_forward(st, c.forward(d_dt.get(), d_rows.get(), d_bias.get()));
    kernels::mamba_dt_backward(
        st, c.backward(d_draw.get(), d_dbias.get(), d_scratch.get(), d_ddt.get(), d_rows.get(), d_bias.get()));
  };
  auto snapshot = [&] {
    return Snapshot{named_bytes("dt", d_dt.download()), named_bytes("ddt_raw", d_draw.download()),
                    named_bytes("ddt_bias", d_dbias.download())};
  };
  cuda::Stream stream;
  prepare();
  enqueue(stream);
  sync_device();
  const Snapshot first = snapshot();
  expect_dt_results(c, d_dt.download(), d_draw.download(), d_dbias.download());
  expect_bitwise_repeatable(stream, prepare, enqueue, snapshot, first);
}

INSTANTIATE_TEST_SUITE_P(Shapes, MambaDtGpu, ::testing::ValuesIn(kShapes), [](const auto& info) {
  const DtShape& s = info.param;
  return strprintf("T%lld_H%lld_stride%lld_at%lld%s", static_cast<long long>(s.T), static_cast<long long>(s.H),
                   static_cast<long long>(s.stride), static_cast<long long>(s.offset),
                   s.dt_max < std::numeric_limits<float>::infinity() ? "_clamped" : "");
});

TEST(MambaAGpu, ForwardAndBackwardMatchReference) {
  for (int64_t H : {1, 7, 128, 300}) {
    auto A_log = random_normal(H, 500 + H, 0.8f);
    for (auto& a : A_log) a += 2.0f;  // A in about [-16, -1]
    const auto dA = random_normal(H, 600 + H, 10.0f);
    const auto dA_log0 = random_normal(H, 700 + H);
    std::vector<float> A_ref(H), dA_log_ref = dA_log0;
    ref::mamba_a_forward(A_ref.data(), A_log.data(), H);
    ref::mamba_a_backward(dA_log_ref.data(), dA.data(), A_log.data(), H);
    DeviceBuffer<float> d_A_log(H), d_A(H), d_dA(H), d_dA_log(H);
    d_A_log.upload(A_log);
    d_dA.upload(dA);
    d_dA_log.upload(dA_log0);
    d_A.poison();
    cuda::Stream stream;
    kernels::mamba_a_forward(stream, {.A = d_A.get(), .A_log = d_A_log.get(), .H = H});
    kernels::mamba_a_backward(stream, {.dA_log = d_dA_log.get(), .dA = d_dA.get(), .A_log = d_A_log.get(), .H = H});
    sync_device();
    EXPECT_LT(relative_error(d_A.download(), A_ref), kFp32RelTol) << "H=" << H;
    EXPECT_LT(relative_error(d_dA_log.download(), dA_log_ref), kFp32RelTol) << "H=" << H;
  }
}

TEST(MambaDtGpuMisc, RejectsBadLimitStrideAndScratch) {
  DeviceBuffer<bf16> d_a(64);
  DeviceBuffer<float> d_f(64);
  cuda::Stream stream;
  kernels::MambaDtForwardParams f{.dt = d_f.get(), .dt_raw = d_a.get(), .dt_bias = d_f.get(), .T = 4, .H = 8,
                                  .dt_min = 1.0f, .dt_max = 0.5f};
  EXPECT_NE(thrown_message([&] { kernels::mamba_dt_forward(stream, f); }).find("dt_limit"), std::string::npos);
  f.dt_min = 0.0f;
  f.dt_raw_row_stride = 7;
  EXPECT_NE(thrown_message([&] { kernels::mamba_dt_forward(stream, f); }).find("dt_raw_row_stride"),
            std::string::npos);
  kernels::MambaDtBackwardParams b{.ddt_raw = d_a.get(), .ddt_bias = d_f.get(), .scratch = d_f.get(),
                                   .scratch_bytes = 0, .ddt = d_f.get(), .dt_raw = d_a.get(), .dt_bias = d_f.get(),
                                   .T = 4, .H = 8};
  EXPECT_NE(thrown_message([&] { kernels::mamba_dt_backward(stream, b); }).find("scratch"), std::string::npos);
}

}  // namespace
