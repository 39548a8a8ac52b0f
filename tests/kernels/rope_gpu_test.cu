// GPU RoPE (in place, on the q and k heads of fused QKV rows) against the per-element kernel it replaced
// (tests/kernels/rope_per_element.cuh: bit for bit) and reference/rope (relative error < kBf16RelTol, 1e-2);
// cases and checks in rope_case.h: everything outside the rotated heads is NaN and must come back bit for
// bit. Shapes cover head_dim 64/128/80/96 (16-byte vector path) and 72/40/6 (scalar path), unaligned x and
// odd row strides (scalar path), odd T, T = 0, GQA head counts, rows wider than one pass of a tile, and
// device positions with and without Llama 3 scaling, partial rotary and LongRoPE. Forward then backward returns the
// input within bf16 tolerance (times LongRoPE's attention factor squared); eager reruns and a CUDA-graph replay repeat
// bitwise. The same shapes (positions t % S) through the cos/sin table of rope_table_build: bit for bit too.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "cuda/stream.h"
#include "kernel_gpu_test_util.h"
#include "kernels/cuda_launch.cuh"
#include "kernels/rope.h"
#include "reference/rope.h"
#include "rope_case.h"
#include "rope_per_element.cuh"

namespace {

using namespace sg;
using namespace sg::test;

void sync() { SG_CUDA_CHECK(cudaDeviceSynchronize()); }

const RopeShape kShapes[] = {
    {1, 1, 2, 1, 64},
    {7, 3, 4, 2, 128},
    {257, 100, 8, 2, 64, 500000.0},       // odd T, GQA 4:1
    {1000, 512, 16, 4, 128},
    {5, 5, 1, 1, 6},                      // head_dim 6: scalar path
    {64, 64, 3, 1, 96},                   // head_dim 96: six vector chunks per half
    {33, 16, 6, 2, 80},                   // head_dim 80
    {129, 64, 7, 1, 72},                  // head_dim 72 (36 pairs, not a multiple of 8): scalar path
    {31, 31, 5, 5, 40},                   // head_dim 40: scalar path
    {0, 16, 4, 2, 128},                   // T = 0: nothing to do, nothing written
    {101, 50, 8, 2, 128, 10000.0, 8},     // padded rows, still 16-byte aligned
    {99, 50, 8, 2, 128, 10000.0, 1},      // odd row stride: scalar path
    {77, 77, 4, 2, 64, 10000.0, 0, 3},    // x not 16-byte aligned: scalar path
    {300, 100, 1, 1, 128},                // one head: the cos/sin table caps the tile's rows
    {3, 3, 96, 32, 128},                  // a row wider than one pass of a tile
    {5, 5, 40, 8, 72},                    // a wide row on the scalar path
    {4, 4, 1, 1, 4096},                   // the largest head_dim
    {300, 1, 4, 2, 128, 500000.0, 0, 0, true, true},   // decoding positions, Llama 3 scaling
    {123, 1, 12, 4, 64, 10000.0, 0, 0, true, false},   // decoding positions
    {45, 1, 3, 1, 72, 10000.0, 0, 0, true, true},      // decoding positions, scalar path
    {1000, 999, 4, 2, 128, 500000.0, 0, 0, false, true},  // Llama 3 scaling, positions t % S (the table too)
    {8192, 2048, 16, 16, 128},            // the 1b recipe's rope: 4 x 2048 tokens, 16 + 16 heads
    {8192, 1024, 12, 12, 64},             // the small recipe's: 8 x 1024 tokens, 12 + 12 heads
    {8192, 4096, 32, 8, 64, 500000.0},
    // Partial rotary: the first rotary_dim dimensions of each head rotated, the rest passed through.
    {4096, 1024, 24, 8, 128, 10000.0, 0, 0, false, false, 96},  // Phi-4-mini's heads: 96 of 128
    {300, 1, 24, 8, 128, 10000.0, 0, 0, true, false, 96},       // decoding positions
    {257, 100, 4, 2, 96, 500000.0, 0, 0, false, true, 32},      // Llama 3 scaling, 32 of 96
    {129, 64, 4, 2, 64, 10000.0, 0, 0, false, false, 24},       // 12 pairs: scalar path
    {77, 77, 4, 2, 64, 10000.0, 1, 3, false, false, 16},        // odd stride, unaligned x: scalar path
    {45, 1, 3, 1, 72, 10000.0, 0, 0, true, false, 2},           // one pair a head, decoding positions
    // LongRoPE: a factor per pair, cos and sin scaled (Phi-4-mini's 96 of 128; Phi-3.5-mini's heads of 96).
    {4096, 4096, 24, 8, 128, 10000.0, 0, 0, false, false, 96, true},
    {300, 1, 32, 32, 96, 10000.0, 0, 0, true, false, 0, true},    // decoding positions
    {129, 64, 4, 2, 64, 10000.0, 0, 0, false, false, 24, true},   // scalar path
};

class RopeGpu : public ::testing::TestWithParam<RopeShape> {};

// Runs `params` (computed or table path) and the per-element kernel, forward and backward, from the case's
// input in d_x and compares them (rope_case.h); then, unless T = 0, checks that eager reruns and a
// CUDA-graph replay of the forward give the same bits, and that backward undoes forward (within bf16).
void expect_matches_per_element(const RopeCase& c, DeviceBuffer<bf16>& d_x, const kernels::RopeParams& params) {
  cuda::Stream stream;
  auto run = [&](bool inverse, bool per_element) {
    d_x.upload(c.input);
    if (per_element) {
      rope_per_element::run(kernels::detail::CudaLaunch{stream}, params, inverse);
    } else if (inverse) {
      kernels::rope_backward(stream, params);
    } else {
      kernels::rope_forward(stream, params);
    }
    sync();
    return d_x.download();
  };
  for (const bool inverse : {false, true}) expect_rope_result(c, run(inverse, false), run(inverse, true), inverse);
  if (c.s.T == 0) return;

  // Backward on the forward's output returns the input (rotation then inverse rotation), times LongRoPE's attention
  // factor squared (each of the two scales cos and sin by it).
  const auto fwd = run(false, false);
  kernels::rope_backward(stream, params);
  sync();
  std::vector<float> want = c.rotated_view(c.input);
  const double gain = c.scaling.attention_factor * c.scaling.attention_factor;
  const int64_t rotated = c.rotated_dims();
  for (size_t e = 0; e < want.size(); ++e) {
    if (static_cast<int64_t>(e) % c.s.head_dim < rotated) want[e] = static_cast<float>(want[e] * gain);
  }
  EXPECT_LT(relative_error(c.rotated_view(d_x.download()), want), kBf16RelTol);

  // Eager reruns and a CUDA-graph replay give the same bits.
  expect_bitwise_repeatable(
      stream, [&] { d_x.upload(c.input); }, [&](cudaStream_t s) { kernels::rope_forward(s, params); },
      [&] { return Snapshot{named_bytes("x", d_x.download())}; }, Snapshot{named_bytes("x", fwd)});
}

TEST_P(RopeGpu, MatchesPerElementKernelBitwiseAndReference) {
  const RopeCase c = make_rope_case(GetParam());
  DeviceBuffer<bf16> d_x(c.input.size());
  DeviceBuffer<int32_t> d_pos(c.positions.size());
  if (!c.positions.empty()) d_pos.upload(c.positions);
  expect_matches_per_element(c, d_x, c.params(d_x.get(), d_pos.get()));
}

// The table path (the training step's, positions t % S): rope_table_build's table within one fp32 ulp of
// the reference table, then the same checks: bit for bit the per-element kernel, as the computed path.
TEST_P(RopeGpu, TablePathMatchesPerElementKernelBitwise) {
  if (GetParam().device_positions) GTEST_SKIP() << "a table serves positions t % S only";
  const RopeCase c = make_rope_case(GetParam());
  DeviceBuffer<bf16> d_x(c.input.size());
  DeviceBuffer<float> d_table(c.table_floats());
  d_table.poison();
  kernels::RopeParams params = c.params(d_x.get(), nullptr);
  {
    cuda::Stream stream;
    params.table = kernels::rope_table_build(stream, c.table_params(d_table.get()));
    sync();
  }
  expect_table_near_reference(c, d_table.download());
  expect_matches_per_element(c, d_x, params);
}

INSTANTIATE_TEST_SUITE_P(Shapes, RopeGpu, ::testing::ValuesIn(kShapes),
                         [](const auto& info) { return rope_shape_name(info.param); });

// Long sequences (positions up to 32767, where angles reach ~3e4 rad): every element agrees with the
// reference within the bf16 rounding of the output, not just in norm.
TEST(RopeGpuMisc, LargePositionsElementwise) {
  const int64_t T = 32768, S = 32768, d = 128;
  const auto x = round_bf16(random_normal(T * d, 400));
  auto want = x;
  ref::rope_forward(want.data(), T, S, 1, d, d, 10000.0);
  DeviceBuffer<bf16> d_x(T * d);
  d_x.upload(to_bf16(x));
  sync();
  cuda::Stream stream;
  kernels::rope_forward(
      stream, {.x = d_x.get(), .T = T, .S = S, .num_heads = 1, .head_dim = d, .row_stride = d, .base = 10000.0});
  sync();
  const auto got = to_float(d_x.download());
  for (int64_t i = 0; i < T * d; ++i) {
    // The output is rounded to bf16 (<= 2^-9 relative); allow 4x that, plus a tiny absolute floor for
    // fp32 FMA-vs-separate-multiply differences near 0.
    ASSERT_NEAR(got[i], want[i], std::abs(want[i]) * (4.0 / 512.0) + 1e-5) << "element " << i;
  }
}

// Decoding: positions read from device memory (arbitrary per row) with Llama 3 frequency scaling (all
// three regimes at head_dim 128, base 5e5, original context 8192), forward and backward, against the
// reference with the same positions and scaling.
TEST(RopeGpuMisc, DevicePositionsAndLlama3ScalingMatchReference) {
  const int64_t T = 300, heads = 6, d = 128, stride = 8 * d;
  ref::RopeScaling scaling;
  scaling.factor = 32.0;
  const auto x = round_bf16(random_normal(T * stride, 401));
  const auto pos_values = random_tokens(T, 131072, 402);
  const std::vector<int32_t> positions(pos_values.begin(), pos_values.end());
  DeviceBuffer<bf16> d_x(T * stride);
  DeviceBuffer<int32_t> d_pos(T);
  d_pos.upload(positions);
  cuda::Stream stream;
  const kernels::RopeParams params{.x = d_x.get(),
                                   .T = T,
                                   .S = 1,
                                   .num_heads = heads,
                                   .head_dim = d,
                                   .row_stride = stride,
                                   .base = 500000.0,
                                   .scaling = scaling,
                                   .positions = d_pos.get()};
  for (const bool inverse : {false, true}) {
    auto want = x;
    if (inverse) {
      ref::rope_backward(want.data(), T, 1, heads, d, stride, 500000.0, scaling, positions.data());
    } else {
      ref::rope_forward(want.data(), T, 1, heads, d, stride, 500000.0, scaling, positions.data());
    }
    d_x.upload(to_bf16(x));
    sync();
    if (inverse) {
      kernels::rope_backward(stream, params);
    } else {
      kernels::rope_forward(stream, params);
    }
    sync();
    EXPECT_LT(relative_error(to_float(d_x.download()), want), kBf16RelTol) << (inverse ? "backward" : "forward");
  }
  // Scaling changes the result (the test would not notice a kernel that ignored it otherwise).
  auto unscaled = x;
  ref::rope_forward(unscaled.data(), T, 1, heads, d, stride, 500000.0, {}, positions.data());
  d_x.upload(to_bf16(x));
  sync();
  kernels::rope_forward(stream, params);
  sync();
  EXPECT_GT(relative_error(to_float(d_x.download()), unscaled), 0.1);
}

TEST(RopeGpuMisc, RejectsBadShapes) {
  DeviceBuffer<bf16> d_x(64);
  cuda::Stream stream;
  using kernels::RopeParams;
  const RopeParams odd_head_dim{.x = d_x.get(), .T = 2, .S = 2, .num_heads = 1, .head_dim = 5, .row_stride = 5};
  const RopeParams stride_below_heads_times_d{
      .x = d_x.get(), .T = 2, .S = 2, .num_heads = 2, .head_dim = 8, .row_stride = 8};
  const RopeParams zero_seq_length{.x = d_x.get(), .T = 2, .S = 0, .num_heads = 1, .head_dim = 8, .row_stride = 8};
  const RopeParams head_dim_above_4096{
      .x = d_x.get(), .T = 1, .S = 1, .num_heads = 1, .head_dim = 4098, .row_stride = 4098};
  EXPECT_THROW(kernels::rope_forward(stream, odd_head_dim), Error);
  EXPECT_THROW(kernels::rope_forward(stream, stride_below_heads_times_d), Error);
  EXPECT_THROW(kernels::rope_forward(stream, zero_seq_length), Error);
  EXPECT_THROW(kernels::rope_forward(stream, head_dim_above_4096), Error);
}

}  // namespace
