// The MoE gating helpers (kernels/moe_gating.h) against reference/moe_gating: widening bf16 to fp32 is
// exact, and the fp32 gradient added into a bf16 gradient equals the fp32 sum rounded once to bf16
// (bitwise, checked against the host's round-to-nearest-even). Odd sizes, 0, and a grid-stride size.
// Outputs are poisoned first.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "cuda/device.h"
#include "cuda/stream.h"
#include "gpu_test_util.h"
#include "kernels/moe_gating.h"
#include "reference/moe_gating.h"

namespace {

using namespace sg;
using namespace sg::test;

class MoeGatingGpu : public ::testing::TestWithParam<int64_t> {
 protected:
  void SetUp() override {
    if (cuda::device_count() == 0) GTEST_SKIP() << "no GPU";
  }
};

TEST_P(MoeGatingGpu, WidenAndAddGradMatchTheReference) {
  const int64_t n = GetParam();
  const std::vector<float> in = round_bf16(random_normal(static_cast<size_t>(n), 7 + n, 2.0f));
  const std::vector<float> dx0 = round_bf16(random_normal(static_cast<size_t>(n), 11 + n));
  const std::vector<float> add = random_normal(static_cast<size_t>(n), 13 + n, 0.1f);
  std::vector<float> widened_ref(static_cast<size_t>(n)), dx_ref = dx0;
  ref::moe_gating_widen(widened_ref.data(), in.data(), n);
  ref::moe_gating_add_grad(dx_ref.data(), add.data(), n);
  const std::vector<float> dx_ref_bf16 = round_bf16(dx_ref);  // the GPU rounds the fp32 sum once

  DeviceBuffer<bf16> d_in(static_cast<size_t>(n)), d_dx(static_cast<size_t>(n));
  DeviceBuffer<float> d_out(static_cast<size_t>(n)), d_add(static_cast<size_t>(n));
  d_in.upload(to_bf16(in));
  d_dx.upload(to_bf16(dx0));
  d_add.upload(add);
  d_out.poison();
  cuda::Stream stream;
  kernels::moe_gating_widen(stream, {.out = d_out.get(), .in = d_in.get(), .n = n});
  kernels::moe_gating_add_grad(stream, {.dx = d_dx.get(), .add = d_add.get(), .n = n});
  SG_CUDA_CHECK(cudaStreamSynchronize(stream));
  const std::vector<float> widened = d_out.download();
  const std::vector<float> dx = to_float(d_dx.download());
  ASSERT_EQ(widened.size(), widened_ref.size());
  EXPECT_EQ(std::memcmp(widened.data(), widened_ref.data(), widened.size() * sizeof(float)), 0)
      << "widening bf16 to fp32 must be exact";
  size_t differ = 0, first = dx.size();
  for (size_t i = 0; i < dx.size(); ++i) {
    if (std::memcmp(&dx[i], &dx_ref_bf16[i], sizeof(float)) != 0 && differ++ == 0) first = i;
  }
  EXPECT_EQ(differ, 0u) << "bf16(dx + add) differs at " << differ << " of " << n << " elements, first " << first
                        << ": " << (first < dx.size() ? dx[first] : 0.0f) << " vs "
                        << (first < dx.size() ? dx_ref_bf16[first] : 0.0f);
}

INSTANTIATE_TEST_SUITE_P(Sizes, MoeGatingGpu, ::testing::Values(0, 1, 7, 1000, 4099, (int64_t{1} << 24) + 3));

}  // namespace
