// GroupedLinearBackwardWeight in overwrite mode (accumulate = false, kernels/grouped_gemm.h) against
// reference/grouped_gemm's overwrite twin, on fresh random bf16-rounded inputs.
// dW is poisoned (NaN) before every overwrite: beta 0 must never read it (a read would give 0 * NaN =
// NaN), every expert's dW must be written, and the dW of a zero-row expert must be exactly 0 (the
// zero-fill launch). Routings: zero-row experts (first, middle, last), all rows on one expert, skewed odd
// counts, 128 experts, capacity segments with padding rows, every expert empty; N/K multiples of 8 that
// are not tile multiples (136, 200, 72) as well as 768.
// Tolerance: relative error < 1e-4 over all of dW (fp32 sums of exact bf16 products; only the summation
// order differs). Also: a second overwrite on a fresh poison is bitwise equal to the first; overwrite then
// accumulate (the first and second microbatch) matches the twin doing the same; a CUDA graph of the
// overwrite replayed with new device counts (experts becoming empty and non-empty) matches the twin and
// equals eager bit for bit.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "cuda/stream.h"
#include "gpu_test_util.h"
#include "grouped_gemm_routing.h"
#include "kernels/grouped_gemm.h"
#include "reference/grouped_gemm.h"

namespace {

using namespace sg;
using namespace sg::test;

constexpr double kWgradRelTol = 1e-4;
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// A backward_weight plan bound to its own workspace and initialized.
struct WgradPlan {
  explicit WgradPlan(const kernels::GroupedGemmDims& dims) : plan(dims), ws(plan.workspace_bytes()) {
    plan.bind(ws.get(), ws.size());
    plan.initialize();
  }
  kernels::GroupedLinearBackwardWeight plan;
  DeviceBuffer<unsigned char> ws;
};

// The twin's overwrite result, starting from NaN so that anything it failed to write shows.
std::vector<float> reference_overwrite(const Routing& r, const std::vector<float>& dy, const std::vector<float>& x) {
  std::vector<float> dw(static_cast<size_t>(r.counts.size()) * r.N * r.K, kNaN);
  ref::grouped_linear_backward_weight(dw.data(), dy.data(), x.data(), rows_of(r), r.N, r.K, /*accumulate=*/false);
  return dw;
}

int64_t non_finite(const std::vector<float>& v) {
  int64_t n = 0;
  for (float f : v) n += !std::isfinite(f);
  return n;
}

// Every element of the dW of each zero-row expert is +0.0f.
void expect_empty_experts_zero(const Routing& r, const std::vector<float>& dw, const char* when) {
  const int64_t NK = r.N * r.K;
  for (size_t g = 0; g < r.counts.size(); ++g) {
    if (r.counts[g] != 0) continue;
    const std::vector<float> got(dw.begin() + g * NK, dw.begin() + (g + 1) * NK);
    EXPECT_TRUE(bitwise_equal(got, std::vector<float>(NK, 0.0f))) << when << ": zero-row expert " << g;
  }
}

class GroupedGemmOverwriteGpu : public ::testing::TestWithParam<Routing> {
 protected:
  cuda::Stream stream;
};

TEST_P(GroupedGemmOverwriteGpu, OverwriteMatchesReferenceOnPoisonedDw) {
  const Routing& r = GetParam();
  const int64_t G = static_cast<int64_t>(r.counts.size()), T = r.total_rows, N = r.N, K = r.K;
  const uint64_t seed = 2000 * G + N + K;
  const auto x = round_bf16(random_normal(T * K, seed + 1));
  const auto dy = round_bf16(random_normal(T * N, seed + 2));
  const auto dw_over = reference_overwrite(r, dy, x);
  ASSERT_EQ(non_finite(dw_over), 0) << "the twin's overwrite left values unwritten";
  auto dw_over_acc = dw_over;  // first microbatch overwrites, the second accumulates
  ref::grouped_linear_backward_weight(dw_over_acc.data(), dy.data(), x.data(), rows_of(r), N, K);

  WgradPlan wgrad(dims_of(r));
  DeviceBuffer<bf16> d_x(T * K), d_dy(T * N);
  DeviceBuffer<float> d_dw(G * N * K);
  DeviceBuffer<int32_t> d_counts(G), d_offsets(G);
  d_x.upload(to_bf16(x));
  d_dy.upload(to_bf16(dy));
  d_counts.upload(r.counts);
  d_offsets.upload(r.offsets);
  kernels::GroupedLinearBackwardWeightParams p{.dw = d_dw.get(),
                                               .dy = d_dy.get(),
                                               .x = d_x.get(),
                                               .counts = d_counts.get(),
                                               .offsets = d_offsets.get(),
                                               .accumulate = false};

  std::vector<float> first;
  for (int run = 0; run < 2; ++run) {
    d_dw.poison();
    device_sync();
    wgrad.plan.run(stream, p);
    stream.synchronize();
    const auto got = d_dw.download();
    EXPECT_EQ(non_finite(got), 0) << "overwrite left poison or read it";
    expect_empty_experts_zero(r, got, "overwrite");
    if (run == 0) {
      EXPECT_LT(relative_error(got, dw_over), kWgradRelTol);
      first = got;
    } else {
      EXPECT_TRUE(bitwise_equal(first, got)) << "second overwrite differs";
    }
  }

  p.accumulate = true;  // the next microbatch adds onto the overwritten dW
  wgrad.plan.run(stream, p);
  stream.synchronize();
  const auto accumulated = d_dw.download();
  EXPECT_LT(relative_error(accumulated, dw_over_acc), kWgradRelTol);
  expect_empty_experts_zero(r, accumulated, "overwrite then accumulate");
}

INSTANTIATE_TEST_SUITE_P(
    Routings, GroupedGemmOverwriteGpu,
    ::testing::Values(packed("one_expert", 136, 200, {77}),
                      packed("balanced8", 768, 256, {64, 64, 64, 64, 64, 64, 64, 64}),
                      packed("zero_experts", 200, 136, {0, 37, 0, 129, 1, 0}),
                      packed("all_on_one", 72, 768, {0, 0, 301, 0}),
                      packed("skewed_odd", 136, 72, {1, 255, 3, 0, 17, 129, 2, 64}),
                      capacity("capacity_padding", 200, 136, 48, {48, 0, 13, 47, 1}),
                      capacity("all_empty", 64, 64, 16, {0, 0, 0}), many_experts()),
    [](const auto& info) { return info.param.name; });

// One capture of the overwrite (GEMM + zero-fill) replayed with new counts in the same device buffers:
// experts that become empty are zeroed, experts that become non-empty are computed, and every replay
// equals an eager run bit for bit.
TEST(GroupedGemmOverwriteGpuGraph, ReplayFollowsDeviceCounts) {
  const Routing a = packed("a", 136, 200, {10, 0, 50, 4});  // 64 rows
  const Routing b = packed("b", 136, 200, {0, 64, 0, 0});   // all on expert 1
  const Routing c = packed("c", 136, 200, {16, 16, 16, 16});
  const int64_t G = 4, T = 64, N = 136, K = 200;
  const auto x = round_bf16(random_normal(T * K, 21));
  const auto dy = round_bf16(random_normal(T * N, 22));
  WgradPlan wgrad(dims_of(a));
  DeviceBuffer<bf16> d_x(T * K), d_dy(T * N);
  DeviceBuffer<float> d_dw(G * N * K);
  DeviceBuffer<int32_t> d_counts(G), d_offsets(G);
  d_x.upload(to_bf16(x));
  d_dy.upload(to_bf16(dy));
  d_counts.upload(a.counts);
  d_offsets.upload(a.offsets);
  cuda::Stream stream;
  const kernels::GroupedLinearBackwardWeightParams p{.dw = d_dw.get(),
                                                     .dy = d_dy.get(),
                                                     .x = d_x.get(),
                                                     .counts = d_counts.get(),
                                                     .offsets = d_offsets.get(),
                                                     .accumulate = false};

  cudaGraph_t graph = nullptr;
  SG_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  wgrad.plan.run(stream, p);
  SG_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec = nullptr;
  SG_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));

  for (const Routing* routing : {&a, &b, &c, &a}) {
    d_counts.upload(routing->counts);
    d_offsets.upload(routing->offsets);
    d_dw.poison();
    device_sync();
    SG_CUDA_CHECK(cudaGraphLaunch(exec, stream));
    stream.synchronize();
    const auto replayed = d_dw.download();
    EXPECT_EQ(non_finite(replayed), 0) << "routing " << routing->name;
    EXPECT_LT(relative_error(replayed, reference_overwrite(*routing, dy, x)), kWgradRelTol)
        << "routing " << routing->name;
    expect_empty_experts_zero(*routing, replayed, routing->name.c_str());

    d_dw.poison();
    device_sync();
    wgrad.plan.run(stream, p);
    stream.synchronize();
    EXPECT_TRUE(bitwise_equal(replayed, d_dw.download())) << "replay != eager for routing " << routing->name;
  }
  SG_CUDA_CHECK(cudaGraphExecDestroy(exec));
  SG_CUDA_CHECK(cudaGraphDestroy(graph));
}

}  // namespace
