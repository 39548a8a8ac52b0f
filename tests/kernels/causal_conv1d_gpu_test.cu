// GPU causal conv1d + SiLU (forward, backward with deterministic dweight/dbias) against
// reference/causal_conv1d on the same bf16-rounded inputs, reading and writing strided views of in_proj
// rows [z | xBC | dt].
// Tolerances: bf16 outputs (out, din) relative error < kBf16RelTol (1e-2) vs the fp32 reference; fp32
// weight gradients computed from identical inputs (dweight, dbias, added into random starting values)
// < kFp32RelTol (1e-5). Outputs are poisoned (NaN) before every run, the din rows hold a sentinel outside
// the view that must survive; a second eager run and a CUDA-graph replay are bitwise identical.
#include <gtest/gtest.h>

#include <vector>

#include "core/strings.h"
#include "cuda/stream.h"
#include "gpu_test_util.h"
#include "kernels/causal_conv1d.h"
#include "reference/causal_conv1d.h"
#include "kernel_gpu_test_util.h"

namespace {

using namespace sg;
using namespace sg::test;

constexpr int64_t W = kernels::kCausalConv1dWidth;
constexpr float kSentinel = 7.0f;

// in/din rows of `stride` elements with the C-wide xBC view at column `offset`.
struct Shape {
  int64_t B, S, C, stride, offset;
};
const Shape kShapes[] = {
    {1, 1, 64, 64, 0},              // one token, contiguous, vector path
    {2, 3, 40, 72, 24},             // every token within the zero padding of the filter, strided
    {2, 257, 256, 392, 128},        // a tiny in_proj row [z 128 | xBC 256 | dt 8], non-tile-multiple S
    {3, 100, 36, 50, 7},            // C % 8 != 0, odd offset: scalar path
    {4, 130, 24, 24, 0},            // contiguous
    {1, 65, 8, 13, 5},              // stride % 8 != 0: scalar path
    {2, 2048, 4096, 6176, 2048},    // small_hybrid's row [z 2048 | xBC 4096 | dt 32]
    {5, 2, 16, 16, 0},              // more batches than tokens per batch
};

class CausalConv1dGpu : public ::testing::TestWithParam<Shape> {};

TEST_P(CausalConv1dGpu, ForwardAndBackwardMatchReferenceAndAreDeterministic) {
  const auto [B, S, C, stride, offset] = GetParam();
  const int64_t rows = B * S;
  const uint64_t seed = static_cast<uint64_t>(B * 1000003 + S * 1009 + C);
  const auto row_buf = round_bf16(random_normal(rows * stride, seed + 1));
  const auto w = round_bf16(random_normal(C * W, seed + 2, 0.5f));
  const auto bias = round_bf16(random_normal(C, seed + 3, 0.5f));
  const auto dout = round_bf16(random_normal(rows * C, seed + 4));
  const auto dw0 = random_normal(C * W, seed + 5);
  const auto db0 = random_normal(C, seed + 6);

  std::vector<float> out_ref(rows * C), din_ref_rows(rows * stride, 0.0f), dw_ref = dw0, db_ref = db0;
  ref::causal_conv1d_silu_forward(out_ref.data(), row_buf.data() + offset, stride, w.data(), bias.data(), B, S, C);
  ref::causal_conv1d_silu_backward(din_ref_rows.data() + offset, stride, dw_ref.data(), db_ref.data(), dout.data(),
                                   row_buf.data() + offset, stride, w.data(), bias.data(), B, S, C);
  const auto din_ref = view_columns(din_ref_rows, rows, stride, offset, C);

  DeviceBuffer<bf16> d_rows(rows * stride), d_w(C * W), d_b(C), d_out(rows * C), d_dout(rows * C),
      d_din(rows * stride);
  DeviceBuffer<float> d_dw(C * W), d_db(C);
  const size_t scratch_bytes = kernels::causal_conv1d_backward_scratch_bytes(B, S, C);
  ASSERT_EQ(scratch_bytes, static_cast<size_t>(kernels::causal_conv1d_backward_num_partials(B, S) * (W + 1) * C) *
                               sizeof(float));
  DeviceBuffer<float> d_scratch(scratch_bytes / sizeof(float));
  d_rows.upload(to_bf16(row_buf));
  d_w.upload(to_bf16(w));
  d_b.upload(to_bf16(bias));
  d_dout.upload(to_bf16(dout));
  const auto din_poisoned = poisoned_view_rows(rows, stride, offset, C, kSentinel);

  auto prepare = [&] {
    d_out.poison();
    d_din.upload(din_poisoned);
    d_dw.upload(dw0);
    d_db.upload(db0);
    d_scratch.poison();
    sync_device();
  };
  auto enqueue = [&](cudaStream_t s) {
    kernels::causal_conv1d_silu_forward(s, {.out = d_out.get(), .in = d_rows.get() + offset, .weight = d_w.get(),
                                            .bias = d_b.get(), .B = B, .S = S, .C = C, .in_stride = stride});
    kernels::causal_conv1d_silu_backward(
        s, {.din = d_din.get() + offset, .dweight = d_dw.get(), .dbias = d_db.get(), .scratch = d_scratch.get(),
            .scratch_bytes = scratch_bytes, .dout = d_dout.get(), .in = d_rows.get() + offset, .weight = d_w.get(),
            .bias = d_b.get(), .B = B, .S = S, .C = C, .in_stride = stride, .din_stride = stride});
  };
  auto snapshot = [&] {
    return Snapshot{named_bytes("out", d_out.download()), named_bytes("din", d_din.download()),
                    named_bytes("dweight", d_dw.download()), named_bytes("dbias", d_db.download())};
  };
  cuda::Stream stream;
  prepare();
  enqueue(stream);
  sync_device();
  const auto out = d_out.download();
  const auto din = d_din.download();
  const auto dw = d_dw.download();
  const auto db = d_db.download();
  EXPECT_LT(relative_error(to_float(out), out_ref), kBf16RelTol);
  EXPECT_LT(relative_error(to_float(view_columns(din, rows, stride, offset, C)), din_ref), kBf16RelTol);
  EXPECT_EQ(count_changed_outside_view(din, rows, stride, offset, C, kSentinel), 0) << "din written outside its view";
  EXPECT_LT(relative_error(dw, dw_ref), kFp32RelTol);
  EXPECT_LT(relative_error(db, db_ref), kFp32RelTol);
  expect_bitwise_repeatable(stream, prepare, enqueue, snapshot,
                            Snapshot{named_bytes("out", out), named_bytes("din", din), named_bytes("dweight", dw),
                                     named_bytes("dbias", db)});
}

INSTANTIATE_TEST_SUITE_P(Shapes, CausalConv1dGpu, ::testing::ValuesIn(kShapes), [](const auto& info) {
  const Shape& s = info.param;
  return strprintf("B%lld_S%lld_C%lld_stride%lld_at%lld", static_cast<long long>(s.B), static_cast<long long>(s.S),
                   static_cast<long long>(s.C), static_cast<long long>(s.stride), static_cast<long long>(s.offset));
});

TEST(CausalConv1dGpuMisc, RejectsSmallScratchAndNarrowStride) {
  const int64_t B = 2, S = 70, C = 16;
  DeviceBuffer<bf16> d_a(B * S * C);
  DeviceBuffer<float> d_f(C * W), d_scratch(4);
  cuda::Stream stream;
  kernels::CausalConv1dBackwardParams p{.din = d_a.get(), .dweight = d_f.get(), .dbias = d_f.get(),
                                        .scratch = d_scratch.get(), .scratch_bytes = 4 * sizeof(float),
                                        .dout = d_a.get(), .in = d_a.get(), .weight = d_a.get(), .bias = d_a.get(),
                                        .B = B, .S = S, .C = C, .in_stride = C, .din_stride = C};
  EXPECT_NE(thrown_message([&] { kernels::causal_conv1d_silu_backward(stream, p); }).find("scratch"),
            std::string::npos);
  EXPECT_NE(thrown_message([&] {
              kernels::causal_conv1d_silu_forward(stream, {.out = d_a.get(), .in = d_a.get(), .weight = d_a.get(),
                                                           .bias = d_a.get(), .B = B, .S = S, .C = C,
                                                           .in_stride = C - 1});
            }).find("in_stride"),
            std::string::npos);
}

}  // namespace
