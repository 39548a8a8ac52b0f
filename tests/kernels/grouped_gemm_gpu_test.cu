// CUTLASS grouped GEMMs of the MoE experts (kernels/grouped_gemm.h) against reference/grouped_gemm on
// fresh random inputs rounded to bf16 on the host (the CPU twin sees exactly what the GPU sees).
// Routings: standard_routings() (grouped_gemm_routing.h: zero-row experts, all rows on one expert,
// skewed, 128 experts, capacity padding, every expert empty; N/K non-tile multiples of 8 and 768).
// Tolerances: forward/backward_input write bf16, relative error < kBf16RelTol (1e-2) against the fp32
// twin over the segment rows (bf16 output rounding alone is ~2e-3); backward_weight accumulates into
// fp32, relative error < 1e-4 (products of bf16 values are exact in fp32; only the summation order differs).
// Outputs are poisoned (NaN) before each run: rows inside the segments must be written, rows outside
// them must stay poisoned. backward_weight starts from a non-zero dW, accumulates twice, and leaves the
// dW of zero-row experts bit-for-bit unchanged. Every op run twice gives bitwise identical results.
// CUDA graph: one capture replayed with different device counts computes the new routing (sizes are
// read from device memory) and equals an eager run bit for bit.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"
#include "cuda/stream.h"
#include "gpu_test_util.h"
#include "grouped_gemm_routing.h"
#include "kernels/grouped_gemm.h"
#include "reference/grouped_gemm.h"

namespace {

using namespace sg;
using namespace sg::test;
using kernels::GroupedGemmDims;

constexpr double kWgradRelTol = 1e-4;

std::vector<bool> covered_rows(const Routing& r) {
  std::vector<bool> covered(r.total_rows, false);
  for (size_t g = 0; g < r.counts.size(); ++g)
    for (int32_t i = 0; i < r.counts[g]; ++i) covered[r.offsets[g] + i] = true;
  return covered;
}

// The covered rows of a [total_rows, width] matrix, concatenated (what the relative error is taken over).
std::vector<float> segment_rows(const std::vector<float>& m, const std::vector<bool>& covered, int64_t width) {
  std::vector<float> out;
  for (size_t r = 0; r < covered.size(); ++r)
    if (covered[r]) out.insert(out.end(), m.begin() + r * width, m.begin() + (r + 1) * width);
  return out;
}

// Rows in no segment must still hold the poison (0xFFFF bf16): the kernel wrote nothing there.
int64_t written_outside_segments(const std::vector<bf16>& m, const std::vector<bool>& covered, int64_t width) {
  int64_t written = 0;
  for (size_t r = 0; r < covered.size(); ++r) {
    if (covered[r]) continue;
    for (int64_t i = 0; i < width; ++i) {
      uint16_t bits;
      std::memcpy(&bits, &m[r * width + i], 2);
      written += bits != 0xFFFF;
    }
  }
  return written;
}

// The three plans of one expert linear on one workspace each, bound and initialized.
struct Plans {
  explicit Plans(const GroupedGemmDims& dims)
      : fwd(dims), dgrad(dims), wgrad(dims), ws_fwd(fwd.workspace_bytes()), ws_dgrad(dgrad.workspace_bytes()),
        ws_wgrad(wgrad.workspace_bytes()) {
    fwd.bind(ws_fwd.get(), ws_fwd.size());
    dgrad.bind(ws_dgrad.get(), ws_dgrad.size());
    wgrad.bind(ws_wgrad.get(), ws_wgrad.size());
    fwd.initialize();
    dgrad.initialize();
    wgrad.initialize();
  }
  kernels::GroupedLinearForward fwd;
  kernels::GroupedLinearBackwardInput dgrad;
  kernels::GroupedLinearBackwardWeight wgrad;
  DeviceBuffer<unsigned char> ws_fwd, ws_dgrad, ws_wgrad;
};

// Runs a bf16-output op twice, each time on a poisoned output: the segment rows match `expected`, no row
// outside the segments is written, and the second run is bitwise equal to the first.
template <class Launch>
void check_bf16_op(const char* op, Launch&& launch, DeviceBuffer<bf16>& out, const std::vector<float>& expected,
                   const std::vector<bool>& covered, int64_t width, cuda::Stream& stream) {
  std::vector<bf16> first;
  for (int run = 0; run < 2; ++run) {
    out.poison();
    sync_device();
    launch();
    stream.synchronize();
    const auto got = out.download();
    if (run == 1) {
      EXPECT_TRUE(bitwise_equal(first, got)) << op << ": second run differs";
      break;
    }
    EXPECT_LT(relative_error(segment_rows(to_float(got), covered, width), segment_rows(expected, covered, width)),
              kBf16RelTol)
        << op;
    EXPECT_EQ(written_outside_segments(got, covered, width), 0) << op;
    first = got;
  }
}


class GroupedGemmGpu : public ::testing::TestWithParam<Routing> {
 protected:
  cuda::Stream stream;
};

TEST_P(GroupedGemmGpu, AllOpsMatchReferenceAndAreDeterministic) {
  const Routing& r = GetParam();
  const int64_t G = static_cast<int64_t>(r.counts.size()), T = r.total_rows, N = r.N, K = r.K;
  const uint64_t seed = 1000 * G + N + K;
  const auto x = round_bf16(random_normal(T * K, seed + 1));
  const auto dy = round_bf16(random_normal(T * N, seed + 2));
  const auto w = round_bf16(random_normal(G * N * K, seed + 3, 0.05f));
  const auto dw0 = random_normal(G * N * K, seed + 4);  // main_grad already holding a previous microbatch
  const auto covered = covered_rows(r);

  std::vector<float> y_ref(T * N, 0.0f), dx_ref(T * K, 0.0f), dw_once = dw0, dw_twice = dw0;
  ref::grouped_linear_forward(y_ref.data(), x.data(), w.data(), rows_of(r), N, K);
  ref::grouped_linear_backward_input(dx_ref.data(), dy.data(), w.data(), rows_of(r), N, K);
  ref::grouped_linear_backward_weight(dw_once.data(), dy.data(), x.data(), rows_of(r), N, K);
  ref::grouped_linear_backward_weight(dw_twice.data(), dy.data(), x.data(), rows_of(r), N, K);
  ref::grouped_linear_backward_weight(dw_twice.data(), dy.data(), x.data(), rows_of(r), N, K);

  Plans plans(dims_of(r));
  DeviceBuffer<bf16> d_x(T * K), d_dy(T * N), d_w(G * N * K), d_y(T * N), d_dx(T * K);
  DeviceBuffer<float> d_dw(G * N * K);
  DeviceBuffer<int32_t> d_counts(G), d_offsets(G);
  d_x.upload(to_bf16(x));
  d_dy.upload(to_bf16(dy));
  d_w.upload(to_bf16(w));
  d_counts.upload(r.counts);
  d_offsets.upload(r.offsets);

  const kernels::GroupedLinearForwardParams fp{
      .y = d_y.get(), .x = d_x.get(), .w = d_w.get(), .counts = d_counts.get(), .offsets = d_offsets.get()};
  check_bf16_op("forward", [&] { plans.fwd.run(stream, fp); }, d_y, y_ref, covered, N, stream);
  const kernels::GroupedLinearBackwardInputParams bp{
      .dx = d_dx.get(), .dy = d_dy.get(), .w = d_w.get(), .counts = d_counts.get(), .offsets = d_offsets.get()};
  check_bf16_op("backward_input", [&] { plans.dgrad.run(stream, bp); }, d_dx, dx_ref, covered, K, stream);

  // backward_weight: accumulates into a non-zero fp32 dW; a second microbatch adds again.
  const kernels::GroupedLinearBackwardWeightParams wp{
      .dw = d_dw.get(), .dy = d_dy.get(), .x = d_x.get(), .counts = d_counts.get(), .offsets = d_offsets.get()};
  d_dw.upload(dw0);
  plans.wgrad.run(stream, wp);
  stream.synchronize();
  const auto dw1 = d_dw.download();
  EXPECT_LT(relative_error(dw1, dw_once), kWgradRelTol);
  for (int64_t g = 0; g < G; ++g) {
    if (r.counts[g] != 0) continue;
    const std::vector<float> got(dw1.begin() + g * N * K, dw1.begin() + (g + 1) * N * K);
    const std::vector<float> before(dw0.begin() + g * N * K, dw0.begin() + (g + 1) * N * K);
    EXPECT_TRUE(bitwise_equal(got, before)) << "zero-row expert " << g << " changed its dW";
  }
  plans.wgrad.run(stream, wp);
  stream.synchronize();
  EXPECT_LT(relative_error(d_dw.download(), dw_twice), kWgradRelTol);
  d_dw.upload(dw0);
  plans.wgrad.run(stream, wp);
  stream.synchronize();
  EXPECT_TRUE(bitwise_equal(dw1, d_dw.download())) << "backward_weight: second run differs";
}

// kernels::GroupedGemmSetup: the three ops' arrays written by ONE setup launch (the overwrite zero-fill in it),
// then each GEMM alone, in another order than added: bitwise what three run() calls write, from poisoned outputs.
TEST_P(GroupedGemmGpu, OneSetupLaunchForSeveralPlansEqualsSeparateRuns) {
  const Routing& r = GetParam();
  const int64_t G = static_cast<int64_t>(r.counts.size()), T = r.total_rows, N = r.N, K = r.K;
  const uint64_t seed = 2000 * G + N + K;
  Plans plans(dims_of(r));
  DeviceBuffer<bf16> d_x(T * K), d_dy(T * N), d_w(G * N * K), d_y(T * N), d_dx(T * K);
  DeviceBuffer<float> d_dw(G * N * K);
  DeviceBuffer<int32_t> d_counts(G), d_offsets(G);
  d_x.upload(to_bf16(round_bf16(random_normal(T * K, seed + 1))));
  d_dy.upload(to_bf16(round_bf16(random_normal(T * N, seed + 2))));
  d_w.upload(to_bf16(round_bf16(random_normal(G * N * K, seed + 3, 0.05f))));
  d_counts.upload(r.counts);
  d_offsets.upload(r.offsets);
  const kernels::GroupedLinearForwardParams fp{
      .y = d_y.get(), .x = d_x.get(), .w = d_w.get(), .counts = d_counts.get(), .offsets = d_offsets.get()};
  const kernels::GroupedLinearBackwardInputParams bp{
      .dx = d_dx.get(), .dy = d_dy.get(), .w = d_w.get(), .counts = d_counts.get(), .offsets = d_offsets.get()};
  const kernels::GroupedLinearBackwardWeightParams wp{.dw = d_dw.get(), .dy = d_dy.get(), .x = d_x.get(),
                                                      .counts = d_counts.get(), .offsets = d_offsets.get(),
                                                      .accumulate = false};
  const auto poison_outputs = [&] {
    d_y.poison();
    d_dx.poison();
    d_dw.poison();
    sync_device();
  };
  poison_outputs();
  plans.fwd.run(stream, fp);
  plans.dgrad.run(stream, bp);
  plans.wgrad.run(stream, wp);
  stream.synchronize();
  const auto y = d_y.download(), dx = d_dx.download();
  const auto dw = d_dw.download();

  poison_outputs();
  kernels::GroupedGemmSetup().add(plans.fwd, fp).add(plans.dgrad, bp).add(plans.wgrad, wp).launch(stream);
  plans.wgrad.run_prepared(stream, wp);
  plans.fwd.run_prepared(stream, fp);
  plans.dgrad.run_prepared(stream, bp);
  stream.synchronize();
  EXPECT_TRUE(bitwise_equal(y, d_y.download())) << "forward";
  EXPECT_TRUE(bitwise_equal(dx, d_dx.download())) << "backward_input";
  EXPECT_TRUE(bitwise_equal(dw, d_dw.download())) << "backward_weight (overwrite: empty experts zeroed at setup)";
}

INSTANTIATE_TEST_SUITE_P(Routings, GroupedGemmGpu, ::testing::ValuesIn(standard_routings()),
                         [](const auto& info) { return info.param.name; });

// One capture replayed with new counts written into the same device buffers between replays: the
// GEMM follows the device sizes, matches the reference of the new routing, and equals eager.
TEST(GroupedGemmGpuGraph, ReplayReadsCountsFromDeviceMemory) {
  const Routing a = packed("a", 136, 200, {10, 0, 50, 4});  // 64 rows
  const Routing b = packed("b", 136, 200, {0, 64, 0, 0});   // the same 64 rows, all on expert 1
  const Routing c = packed("c", 136, 200, {16, 16, 16, 16});
  const int64_t G = 4, T = 64, N = 136, K = 200;
  const auto x = round_bf16(random_normal(T * K, 11));
  const auto w = round_bf16(random_normal(G * N * K, 12, 0.05f));
  Plans plans(dims_of(a));
  DeviceBuffer<bf16> d_x(T * K), d_w(G * N * K), d_y(T * N);
  DeviceBuffer<int32_t> d_counts(G), d_offsets(G);
  d_x.upload(to_bf16(x));
  d_w.upload(to_bf16(w));
  d_counts.upload(a.counts);
  d_offsets.upload(a.offsets);
  cuda::Stream stream;
  const kernels::GroupedLinearForwardParams fp{
      .y = d_y.get(), .x = d_x.get(), .w = d_w.get(), .counts = d_counts.get(), .offsets = d_offsets.get()};

  expect_replays_follow_routings<bf16>(
      stream, [&](cudaStream_t st) { plans.fwd.run(st, fp); }, {&a, &b, &c, &a}, d_counts, d_offsets, d_y,
      [&](const Routing& routing, const std::vector<bf16>& replayed) {
        std::vector<float> y_ref(T * N, 0.0f);
        ref::grouped_linear_forward(y_ref.data(), x.data(), w.data(), rows_of(routing), N, K);
        EXPECT_LT(relative_error(to_float(replayed), y_ref), kBf16RelTol) << "routing " << routing.name;
      });
}

TEST(GroupedGemmGpuPlan, RejectsMisuseWithClearErrors) {
  const GroupedGemmDims dims{.num_groups = 2, .max_total_rows = 32, .N = 64, .K = 64};
  kernels::GroupedLinearForward fwd(dims);
  EXPECT_GT(fwd.workspace_bytes(), 0u);
  DeviceBuffer<bf16> x(32 * 64 + 8), w(2 * 64 * 64), y(32 * 64);
  DeviceBuffer<int32_t> counts(2), offsets(2);
  cuda::Stream stream;
  const kernels::GroupedLinearForwardParams p{
      .y = y.get(), .x = x.get(), .w = w.get(), .counts = counts.get(), .offsets = offsets.get()};
  EXPECT_NE(thrown_message([&] { fwd.run(stream, p); }).find("before bind"), std::string::npos);
  EXPECT_NE(thrown_message([&] { fwd.initialize(); }).find("before bind"), std::string::npos);
  DeviceBuffer<unsigned char> ws(fwd.workspace_bytes());
  EXPECT_NE(thrown_message([&] { fwd.bind(ws.get(), fwd.workspace_bytes() - 1); }).find("workspace_bytes()"),
            std::string::npos);
  fwd.bind(ws.get(), ws.size());
  fwd.initialize();
  auto misaligned = p;
  misaligned.x = x.get() + 1;  // 2-byte offset
  EXPECT_NE(thrown_message([&] { fwd.run(stream, misaligned); }).find("16-byte aligned"), std::string::npos);
  auto missing = p;
  missing.counts = nullptr;
  EXPECT_THROW(fwd.run(stream, missing), Error);
  // run_prepared() only on the operands of the plan's last setup, with no other setup of it since.
  auto other = p;
  other.y = y.get() + 8;  // 16 bytes on
  counts.upload(std::vector<int32_t>{16, 8});
  offsets.upload(std::vector<int32_t>{0, 16});
  sync_device();
  EXPECT_NE(thrown_message([&] { fwd.run_prepared(stream, p); }).find("not last set up for"), std::string::npos);
  fwd.run(stream, p);
  fwd.run_prepared(stream, p);  // run() set the arrays up for p
  EXPECT_NE(thrown_message([&] { fwd.run_prepared(stream, other); }).find("not last set up for"), std::string::npos);
  kernels::GroupedGemmSetup().add(fwd, other).launch(stream);
  EXPECT_NE(thrown_message([&] { fwd.run_prepared(stream, p); }).find("not last set up for"), std::string::npos);
  fwd.run_prepared(stream, other);
  EXPECT_NE(thrown_message([&] { kernels::GroupedGemmSetup().add(fwd, p).add(fwd, other); }).find("added twice"),
            std::string::npos);
  EXPECT_NE(thrown_message([&] { kernels::GroupedGemmSetup().launch(stream); }).find("no plan"), std::string::npos);
  stream.synchronize();
  const GroupedGemmDims unaligned{.num_groups = 2, .max_total_rows = 32, .N = 64, .K = 60};
  EXPECT_NE(thrown_message([&] { kernels::GroupedLinearBackwardWeight bad(unaligned); }).find("multiples of 8"),
            std::string::npos);
}

}  // namespace
