// GPU causal conv1d + SiLU (forward, backward with deterministic dweight/dbias) against
// reference/causal_conv1d on the same bf16-rounded inputs, reading and writing strided views of in_proj
// rows [z | xBC | dt]; cases and tolerances: causal_conv1d_case.h. Outputs are poisoned before every run;
// a second eager run and a CUDA-graph replay are bitwise identical.
#include <gtest/gtest.h>

#include <vector>

#include "core/strings.h"
#include "cuda/stream.h"
#include "gpu_test_util.h"
#include "kernel_gpu_test_util.h"
#include "kernels/causal_conv1d.h"
#include "kernels/causal_conv1d_case.h"

namespace {

using namespace sg;
using namespace sg::test;

const Conv1dShape kShapes[] = {
    {1, 1, 64, 64, 0},            // one token, packed rows, vector path
    {2, 3, 40, 72, 24},           // every token within the zero padding of the filter, strided
    {2, 257, 256, 392, 128},      // a tiny in_proj row [z 128 | xBC 256 | dt 8], non-tile-multiple S
    {3, 100, 36, 50, 7},          // C % 8 != 0, odd offset: scalar path
    {4, 130, 24, 24, 0},          // packed
    {1, 65, 8, 13, 5},            // stride % 8 != 0: scalar path
    {2, 2048, 4096, 6176, 2048},  // small_hybrid's row [z 2048 | xBC 4096 | dt 32]
    {5, 2, 16, 16, 0},            // more batches than tokens per batch
    {5, 4000, 8, 8, 0},           // more tiles than slots: every slot walks several
};

class CausalConv1dGpu : public ::testing::TestWithParam<Conv1dShape> {};

TEST_P(CausalConv1dGpu, ForwardAndBackwardMatchReferenceAndAreDeterministic) {
  const Conv1dCase c = make_conv1d_case(GetParam());
  const Conv1dShape& s = c.s;
  const int64_t T = c.tokens();
  ASSERT_EQ(c.scratch_bytes(), static_cast<size_t>(kernels::causal_conv1d_backward_num_partials(s.B, s.S) *
                                                   (Conv1dCase::W + 1) * s.C) *
                                   sizeof(float));
  DeviceBuffer<bf16> d_rows(T * s.stride), d_w(s.C * Conv1dCase::W), d_b(s.C), d_out(T * s.C), d_dout(T * s.C),
      d_din(T * s.stride);
  DeviceBuffer<float> d_dw(s.C * Conv1dCase::W), d_db(s.C), d_scratch(c.scratch_bytes() / sizeof(float));
  d_rows.upload(c.rows);
  d_w.upload(c.weight);
  d_b.upload(c.bias);
  d_dout.upload(c.dout);
  auto prepare = [&] {
    d_out.poison();
    d_din.upload(c.din_poisoned);
    d_dw.upload(c.dweight0);
    d_db.upload(c.dbias0);
    d_scratch.poison();
    sync_device();
  };
  auto enqueue = [&](cudaStream_t st) {
    kernels::causal_conv1d_silu_forward(st, c.forward(d_out.get(), d_rows.get(), d_w.get(), d_b.get()));
    kernels::causal_conv1d_silu_backward(st, c.backward(d_din.get(), d_dw.get(), d_db.get(), d_scratch.get(),
                                                        d_dout.get(), d_rows.get(), d_w.get(), d_b.get()));
  };
  auto snapshot = [&] {
    return Snapshot{named_bytes("out", d_out.download()), named_bytes("din", d_din.download()),
                    named_bytes("dweight", d_dw.download()), named_bytes("dbias", d_db.download())};
  };
  cuda::Stream stream;
  prepare();
  enqueue(stream);
  sync_device();
  const Snapshot first = snapshot();
  expect_conv1d_results(c, d_out.download(), d_din.download(), d_dw.download(), d_db.download());
  expect_bitwise_repeatable(stream, prepare, enqueue, snapshot, first);
}

INSTANTIATE_TEST_SUITE_P(Shapes, CausalConv1dGpu, ::testing::ValuesIn(kShapes), [](const auto& info) {
  const Conv1dShape& s = info.param;
  return strprintf("B%lld_S%lld_C%lld_stride%lld_at%lld", static_cast<long long>(s.B), static_cast<long long>(s.S),
                   static_cast<long long>(s.C), static_cast<long long>(s.stride), static_cast<long long>(s.offset));
});

TEST(CausalConv1dGpuMisc, RejectsSmallScratchAndNarrowStride) {
  const int64_t B = 2, S = 70, C = 16;
  DeviceBuffer<bf16> d_a(B * S * C);
  DeviceBuffer<float> d_f(C * Conv1dCase::W), d_scratch(4);
  cuda::Stream stream;
  kernels::CausalConv1dBackwardParams p{.din = d_a.get(), .dweight = d_f.get(), .dbias = d_f.get(),
                                        .scratch = d_scratch.get(), .scratch_bytes = 4 * sizeof(float),
                                        .dout = d_a.get(), .in = d_a.get(), .weight = d_a.get(), .bias = d_a.get(),
                                        .B = B, .S = S, .C = C};
  EXPECT_NE(thrown_message([&] { kernels::causal_conv1d_silu_backward(stream, p); }).find("scratch"),
            std::string::npos);
  kernels::CausalConv1dForwardParams f{.out = d_a.get(), .in = d_a.get(), .weight = d_a.get(), .bias = d_a.get(),
                                       .B = B, .S = S, .C = C, .in_row_stride = C - 1};
  EXPECT_NE(thrown_message([&] { kernels::causal_conv1d_silu_forward(stream, f); }).find("in_row_stride"),
            std::string::npos);
}

}  // namespace
