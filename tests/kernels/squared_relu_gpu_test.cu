// GPU squared ReLU forward/backward against reference/squared_relu on the same bf16-rounded inputs.
// Both compute the same fp32 operations (a max and one product each way), so the GPU output must equal the
// reference rounded to bf16 bit for bit; outputs are poisoned first, in-place runs give the same bits.
#include <gtest/gtest.h>

#include <vector>

#include "core/strings.h"
#include "cuda/stream.h"
#include "gpu_test_util.h"
#include "kernels/squared_relu.h"
#include "reference/squared_relu.h"
#include "kernel_gpu_test_util.h"

namespace {

using namespace sg;
using namespace sg::test;

struct Shape {
  int64_t T, F;
};
const Shape kShapes[] = {{1, 1}, {3, 37}, {257, 256}, {1000, 768}, {33, 2056}, {4096, 3072}};

class SquaredReluGpu : public ::testing::TestWithParam<Shape> {};

TEST_P(SquaredReluGpu, MatchesReferenceBitwise) {
  const auto [T, F] = GetParam();
  const int64_t n = T * F;
  const auto x = round_bf16(random_normal(n, 300 + T + F, 2.0f));
  const auto g = round_bf16(random_normal(n, 400 + T + F));
  std::vector<float> out_ref(n), din_ref(n);
  ref::squared_relu_forward(out_ref.data(), x.data(), T, F);
  ref::squared_relu_backward(din_ref.data(), g.data(), x.data(), T, F);
  const auto out_expect = to_bf16(out_ref), din_expect = to_bf16(din_ref);

  DeviceBuffer<bf16> d_x(n), d_g(n), d_out(n), d_din(n);
  d_x.upload(to_bf16(x));
  d_g.upload(to_bf16(g));
  d_out.poison();
  d_din.poison();
  cuda::Stream stream;
  kernels::squared_relu_forward(stream, {.out = d_out.get(), .in = d_x.get(), .T = T, .F = F});
  kernels::squared_relu_backward(stream, {.din = d_din.get(), .dout = d_g.get(), .in = d_x.get(), .T = T, .F = F});
  sync_device();
  EXPECT_TRUE(bitwise_equal(d_out.download(), out_expect)) << "forward != bf16(relu(x)^2)";
  EXPECT_TRUE(bitwise_equal(d_din.download(), din_expect)) << "backward != bf16(dout * 2 relu(x))";
  // In place: din over dout, then out over in.
  kernels::squared_relu_backward(stream, {.din = d_g.get(), .dout = d_g.get(), .in = d_x.get(), .T = T, .F = F});
  kernels::squared_relu_forward(stream, {.out = d_x.get(), .in = d_x.get(), .T = T, .F = F});
  sync_device();
  EXPECT_TRUE(bitwise_equal(d_g.download(), din_expect)) << "in-place backward";
  EXPECT_TRUE(bitwise_equal(d_x.download(), out_expect)) << "in-place forward";
}

INSTANTIATE_TEST_SUITE_P(Shapes, SquaredReluGpu, ::testing::ValuesIn(kShapes), [](const auto& info) {
  return strprintf("T%lld_F%lld", static_cast<long long>(info.param.T), static_cast<long long>(info.param.F));
});

// 16-byte-misaligned pointers with a count divisible by 8 take the scalar path and give the same bits.
TEST(SquaredReluGpuMisc, MisalignedPointersUseScalarPath) {
  const int64_t T = 4, F = 64, n = T * F;
  const auto x = round_bf16(random_normal(n + 1, 17, 2.0f));
  std::vector<float> out_ref(n);
  ref::squared_relu_forward(out_ref.data(), x.data() + 1, T, F);
  DeviceBuffer<bf16> d_x(n + 1), d_out(n + 1);
  d_x.upload(to_bf16(x));
  d_out.poison();
  cuda::Stream stream;
  kernels::squared_relu_forward(stream, {.out = d_out.get() + 1, .in = d_x.get() + 1, .T = T, .F = F});
  sync_device();
  auto out = d_out.download();
  out.erase(out.begin());
  EXPECT_TRUE(bitwise_equal(out, to_bf16(out_ref)));
}

}  // namespace
