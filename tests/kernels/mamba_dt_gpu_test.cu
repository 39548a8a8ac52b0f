// GPU dt = clamp(softplus(dt_raw + dt_bias)) and A = -exp(A_log), forward and backward, against
// reference/mamba_dt on the same bf16-rounded inputs; dt_raw and its gradient are the strided dt slice of
// in_proj rows.
// Tolerances: fp32 outputs from identical inputs (dt, ddt_bias, A, dA_log) relative error < kFp32RelTol
// (1e-5); bf16 ddt_raw < kBf16RelTol (1e-2). Outputs are poisoned before every run, the gradient rows hold
// a sentinel outside the view that must survive; a second eager run and a CUDA-graph replay are bitwise
// identical.
#include <gtest/gtest.h>

#include <limits>
#include <vector>

#include "core/strings.h"
#include "cuda/stream.h"
#include "gpu_test_util.h"
#include "kernels/mamba_dt.h"
#include "reference/mamba_dt.h"
#include "kernel_gpu_test_util.h"

namespace {

using namespace sg;
using namespace sg::test;

constexpr float kSentinel = -3.0f;
constexpr float kInf = std::numeric_limits<float>::infinity();

// T tokens whose rows have `stride` elements with the H-wide dt view at column `offset`; dt_limit.
struct Case {
  int64_t T, H, stride, offset;
  float dt_min, dt_max;
};
const Case kCases[] = {
    {1, 1, 1, 0, 0.0f, kInf},
    {3, 8, 392, 384, 0.0f, kInf},       // a tiny in_proj row [z 128 | xBC 256 | dt 8]
    {257, 33, 40, 7, 0.0f, kInf},       // more heads than a block's 32, odd offset
    {1000, 5, 5, 0, 0.05f, 1.0f},       // contiguous, clipped on both sides
    {8192, 32, 6176, 6144, 0.0f, kInf}, // small_hybrid: B * S = 4 * 2048 tokens, dt at the row's end
    {4099, 128, 130, 1, 0.001f, 0.1f},  // Nemotron-H 8B's 128 heads, Megatron's dt range as a limit
};

class MambaDtGpu : public ::testing::TestWithParam<Case> {};

TEST_P(MambaDtGpu, ForwardAndBackwardMatchReferenceAndAreDeterministic) {
  const auto [T, H, stride, offset, lo, hi] = GetParam();
  const uint64_t seed = static_cast<uint64_t>(T * 131 + H);
  const auto rows = round_bf16(random_normal(T * stride, seed + 1, 2.0f));
  auto bias = random_normal(H, seed + 2);
  for (auto& b : bias) b -= 3.0f;  // softplus(bias) ~ 0.05: dt's usual scale
  const auto ddt = random_normal(T * H, seed + 3);
  const auto dbias0 = random_normal(H, seed + 4);

  std::vector<float> dt_ref(T * H), draw_ref_rows(T * stride, 0.0f), dbias_ref = dbias0;
  ref::mamba_dt_forward(dt_ref.data(), rows.data() + offset, stride, bias.data(), T, H, lo, hi);
  ref::mamba_dt_backward(draw_ref_rows.data() + offset, stride, dbias_ref.data(), ddt.data(), rows.data() + offset,
                         stride, bias.data(), T, H, lo, hi);
  const auto draw_ref = view_columns(draw_ref_rows, T, stride, offset, H);

  DeviceBuffer<bf16> d_rows(T * stride), d_draw(T * stride);
  DeviceBuffer<float> d_bias(H), d_dt(T * H), d_ddt(T * H), d_dbias(H);
  const size_t scratch_bytes = kernels::mamba_dt_backward_scratch_bytes(T, H);
  DeviceBuffer<float> d_scratch(scratch_bytes / sizeof(float));
  d_rows.upload(to_bf16(rows));
  d_bias.upload(bias);
  d_ddt.upload(ddt);
  const auto draw_poisoned = poisoned_view_rows(T, stride, offset, H, kSentinel);
  auto prepare = [&] {
    d_dt.poison();
    d_draw.upload(draw_poisoned);
    d_dbias.upload(dbias0);
    d_scratch.poison();
    sync_device();
  };
  auto enqueue = [&](cudaStream_t s) {
    kernels::mamba_dt_forward(s, {.dt = d_dt.get(), .dt_raw = d_rows.get() + offset, .dt_bias = d_bias.get(), .T = T,
                                  .H = H, .raw_stride = stride, .dt_min = lo, .dt_max = hi});
    kernels::mamba_dt_backward(s, {.ddt_raw = d_draw.get() + offset, .ddt_bias = d_dbias.get(),
                                   .scratch = d_scratch.get(), .scratch_bytes = scratch_bytes, .ddt = d_ddt.get(),
                                   .dt_raw = d_rows.get() + offset, .dt_bias = d_bias.get(), .T = T, .H = H,
                                   .raw_stride = stride, .draw_stride = stride, .dt_min = lo, .dt_max = hi});
  };
  auto snapshot = [&] {
    return Snapshot{named_bytes("dt", d_dt.download()), named_bytes("ddt_raw", d_draw.download()),
                    named_bytes("ddt_bias", d_dbias.download())};
  };
  cuda::Stream stream;
  prepare();
  enqueue(stream);
  sync_device();
  const auto dt = d_dt.download();
  const auto draw = d_draw.download();
  const auto dbias = d_dbias.download();
  EXPECT_LT(relative_error(dt, dt_ref), kFp32RelTol);
  EXPECT_LT(relative_error(to_float(view_columns(draw, T, stride, offset, H)), draw_ref), kBf16RelTol);
  EXPECT_EQ(count_changed_outside_view(draw, T, stride, offset, H, kSentinel), 0) << "ddt_raw written outside its view";
  EXPECT_LT(relative_error(dbias, dbias_ref), kFp32RelTol);
  for (float v : dt) {
    ASSERT_GE(v, lo);
    ASSERT_LE(v, hi);
  }
  expect_bitwise_repeatable(
      stream, prepare, enqueue, snapshot,
      Snapshot{named_bytes("dt", dt), named_bytes("ddt_raw", draw), named_bytes("ddt_bias", dbias)});
}

INSTANTIATE_TEST_SUITE_P(Cases, MambaDtGpu, ::testing::ValuesIn(kCases), [](const auto& info) {
  const Case& c = info.param;
  return strprintf("T%lld_H%lld_stride%lld_at%lld%s", static_cast<long long>(c.T), static_cast<long long>(c.H),
                   static_cast<long long>(c.stride), static_cast<long long>(c.offset),
                   c.dt_max < kInf ? "_clamped" : "");
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
                                  .raw_stride = 8, .dt_min = 1.0f, .dt_max = 0.5f};
  EXPECT_NE(thrown_message([&] { kernels::mamba_dt_forward(stream, f); }).find("dt_limit"), std::string::npos);
  f.dt_min = 0.0f;
  f.raw_stride = 7;
  EXPECT_NE(thrown_message([&] { kernels::mamba_dt_forward(stream, f); }).find("raw_stride"), std::string::npos);
  kernels::MambaDtBackwardParams b{.ddt_raw = d_a.get(), .ddt_bias = d_f.get(), .scratch = d_f.get(),
                                   .scratch_bytes = 0, .ddt = d_f.get(), .dt_raw = d_a.get(), .dt_bias = d_f.get(),
                                   .T = 4, .H = 8, .raw_stride = 8, .draw_stride = 8};
  EXPECT_NE(thrown_message([&] { kernels::mamba_dt_backward(stream, b); }).find("scratch"), std::string::npos);
}

}  // namespace
