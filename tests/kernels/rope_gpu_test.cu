// GPU RoPE (in place, on the q and k heads of fused QKV rows) against reference/rope.
// Tolerance: bf16 outputs vs the fp32 reference on the same bf16 inputs, relative error < kBf16RelTol
// (1e-2). The v heads (outside the rotated range) must be bitwise untouched. The kernels work in place,
// so instead of poisoning, every rotated element is compared with the reference (elements at positions
// > 0 all change). Forward then backward returns the input within bf16 tolerance; runs repeat bitwise.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "core/strings.h"
#include "cuda/stream.h"
#include "gpu_test_util.h"
#include "kernels/rope.h"
#include "reference/rope.h"

namespace {

using namespace sg;
using namespace sg::test;

void sync() { SG_CUDA_CHECK(cudaDeviceSynchronize()); }

struct Shape {
  int64_t T, S, q_heads, kv_heads, head_dim;
  double base;
};
const Shape kShapes[] = {{1, 1, 2, 1, 64, 10000.0},    {7, 3, 4, 2, 128, 10000.0},   {257, 100, 8, 2, 64, 500000.0},
                         {1000, 512, 16, 4, 128, 1e4}, {5, 5, 1, 1, 6, 10000.0},     {64, 64, 3, 1, 96, 10000.0},
                         {8192, 4096, 32, 8, 64, 5e5}};

class RopeGpu : public ::testing::TestWithParam<Shape> {};

TEST_P(RopeGpu, ForwardBackwardMatchReference) {
  const auto [T, S, nq, nkv, d, base] = GetParam();
  const int64_t stride = (nq + 2 * nkv) * d;  // [q | k | v]
  const int64_t heads = nq + nkv;             // q and k are contiguous: one call rotates both
  const int64_t rotated = heads * d;
  const auto qkv = round_bf16(random_normal(T * stride, 300 + T + d));

  auto fwd_ref = qkv;
  ref::rope_forward(fwd_ref.data(), T, S, heads, d, stride, base);
  auto bwd_ref = qkv;
  ref::rope_backward(bwd_ref.data(), T, S, heads, d, stride, base);

  DeviceBuffer<bf16> d_x(T * stride);
  cuda::Stream stream;
  const kernels::RopeParams params{d_x.get(), T, S, heads, d, stride, base};

  d_x.upload(to_bf16(qkv));
  sync();
  kernels::rope_forward(stream, params);
  sync();
  const auto fwd_bf16 = d_x.download();
  const auto fwd = to_float(fwd_bf16);
  EXPECT_LT(relative_error(fwd, fwd_ref), kBf16RelTol) << "T=" << T << " d=" << d;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t j = rotated; j < stride; ++j) ASSERT_EQ(fwd[t * stride + j], qkv[t * stride + j]) << "v changed";

  // Backward on the forward's output returns the input (rotation then inverse rotation).
  kernels::rope_backward(stream, params);
  sync();
  EXPECT_LT(relative_error(to_float(d_x.download()), qkv), kBf16RelTol);

  d_x.upload(to_bf16(qkv));
  sync();
  kernels::rope_backward(stream, params);
  sync();
  EXPECT_LT(relative_error(to_float(d_x.download()), bwd_ref), kBf16RelTol) << "T=" << T << " d=" << d;

  d_x.upload(to_bf16(qkv));
  sync();
  kernels::rope_forward(stream, params);
  sync();
  const auto again = d_x.download();
  EXPECT_EQ(std::memcmp(again.data(), fwd_bf16.data(), again.size() * sizeof(bf16)), 0) << "second run differs";
}

INSTANTIATE_TEST_SUITE_P(Shapes, RopeGpu, ::testing::ValuesIn(kShapes), [](const auto& info) {
  return strprintf("T%lld_S%lld_d%lld_h%lld", static_cast<long long>(info.param.T), static_cast<long long>(info.param.S),
                   static_cast<long long>(info.param.head_dim),
                   static_cast<long long>(info.param.q_heads + info.param.kv_heads));
});

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
  kernels::rope_forward(stream, {d_x.get(), T, S, 1, d, d, 10000.0});
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
  kernels::RopeParams params{d_x.get(), T, 1, heads, d, stride, 500000.0};
  params.scaling = scaling;
  params.positions = d_pos.get();
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
  EXPECT_THROW(kernels::rope_forward(stream, {d_x.get(), 2, 2, 1, 5, 5, 10000.0}), Error);   // odd head_dim
  EXPECT_THROW(kernels::rope_forward(stream, {d_x.get(), 2, 2, 2, 8, 8, 10000.0}), Error);   // stride < heads*d
  EXPECT_THROW(kernels::rope_forward(stream, {d_x.get(), 2, 0, 1, 8, 8, 10000.0}), Error);   // S == 0
}

}  // namespace
