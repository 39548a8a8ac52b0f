// GPU global grad norm, clip coefficient and non-finite flags against reference/grad_norm.
// Tolerance: the norm is an fp64 sum rounded to fp32, so it must match the fp64 reference within 1e-6
// relative (tighter than kFp32RelTol); outputs are poisoned; a second run is bitwise identical.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "cuda/stream.h"
#include "gpu_test_util.h"
#include "kernels/grad_norm.h"
#include "reference/grad_norm.h"

namespace {

using namespace sg;
using namespace sg::test;

struct NormResult {
  float norm, clip;
  int flag;
};

NormResult run_grad_norm(const DeviceBuffer<float>& grads, int64_t n, float max_norm, int initial_flag) {
  DeviceBuffer<double> partials(kernels::kGradNormPartials);
  DeviceBuffer<float> norm(1), clip(1);
  DeviceBuffer<int> flag(1);
  partials.poison();
  norm.poison();
  clip.poison();
  flag.upload({initial_flag});
  cuda::Stream stream;
  kernels::grad_global_norm(stream, {grads.get(), n, partials.get(), norm.get(), clip.get(), flag.get(), max_norm});
  SG_CUDA_CHECK(cudaStreamSynchronize(stream));
  return {norm.download()[0], clip.download()[0], flag.download()[0]};
}

class GradNormGpu : public ::testing::TestWithParam<int64_t> {};

TEST_P(GradNormGpu, MatchesReferenceAndDeterministic) {
  const int64_t n = GetParam();
  const std::vector<float> grads = random_normal(n, 300 + n, 1e-3f);
  DeviceBuffer<float> d_grads(n);
  d_grads.upload(grads);
  const double ref_norm = ref::grad_global_norm(grads.data(), n);
  // One threshold below the norm (clipping) and one above (coefficient 1), and clipping off.
  for (const float max_norm : {static_cast<float>(ref_norm * 0.5), static_cast<float>(ref_norm * 2.0 + 1.0), 0.0f}) {
    const NormResult r = run_grad_norm(d_grads, n, max_norm, 0);
    EXPECT_NEAR(r.norm, ref_norm, 1e-6 * ref_norm + 1e-30) << "n=" << n;
    const float ref_clip = ref::clip_coefficient(ref_norm, max_norm);
    EXPECT_NEAR(r.clip, ref_clip, 1e-6 * ref_clip) << "n=" << n << " max_norm=" << max_norm;
    EXPECT_EQ(r.flag, 0);
    const NormResult again = run_grad_norm(d_grads, n, max_norm, 0);
    EXPECT_EQ(std::memcmp(&r.norm, &again.norm, sizeof(float)), 0);
    EXPECT_EQ(std::memcmp(&r.clip, &again.clip, sizeof(float)), 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Sizes, GradNormGpu,
                         ::testing::Values(int64_t{1}, int64_t{1003}, int64_t{262144}, int64_t{(1 << 20) + 3},
                                           int64_t{50000017}));

TEST(GradNormGpuFlags, NonFiniteGradSetsFlagAndDisablesClipping) {
  const int64_t n = 1003;
  for (const float bad : {NAN, INFINITY, -INFINITY}) {
    std::vector<float> grads = random_normal(n, 17);
    grads[n - 1] = bad;  // the last, non-multiple element: it must be visited
    DeviceBuffer<float> d_grads(n);
    d_grads.upload(grads);
    const NormResult r = run_grad_norm(d_grads, n, 1.0f, 0);
    EXPECT_FALSE(std::isfinite(r.norm));
    EXPECT_EQ(r.clip, 1.0f);
    EXPECT_EQ(r.flag, 1);
  }
}

TEST(GradNormGpuFlags, FlagIsStickyAndZeroNormIsFine) {
  const int64_t n = 77;
  DeviceBuffer<float> d_grads(n);
  d_grads.upload(std::vector<float>(n, 0.0f));
  const NormResult cleared = run_grad_norm(d_grads, n, 1.0f, 0);
  EXPECT_EQ(cleared.norm, 0.0f);
  EXPECT_EQ(cleared.clip, 1.0f);
  EXPECT_EQ(cleared.flag, 0);
  const NormResult sticky = run_grad_norm(d_grads, n, 1.0f, 1);
  EXPECT_EQ(sticky.flag, 1) << "a finite norm must not clear a flag set earlier";
}

TEST(FlagIfNonfiniteGpu, LossCheck) {
  cuda::Stream stream;
  DeviceBuffer<float> loss(1);
  DeviceBuffer<int> flag(1);
  const auto check = [&](float value, int initial) {
    loss.upload({value});
    flag.upload({initial});
    kernels::flag_if_nonfinite(stream, {loss.get(), 1, flag.get()});
    SG_CUDA_CHECK(cudaStreamSynchronize(stream));
    return flag.download()[0];
  };
  EXPECT_EQ(check(2.5f, 0), 0);
  EXPECT_EQ(check(NAN, 0), 1);
  EXPECT_EQ(check(INFINITY, 0), 1);
  EXPECT_EQ(check(2.5f, 1), 1);  // sticky

  const int64_t n = 300007;
  std::vector<float> values = random_normal(n, 5);
  DeviceBuffer<float> d_values(n);
  d_values.upload(values);
  flag.upload({0});
  kernels::flag_if_nonfinite(stream, {d_values.get(), n, flag.get()});
  SG_CUDA_CHECK(cudaStreamSynchronize(stream));
  EXPECT_EQ(flag.download()[0], 0);
  values[n - 2] = -INFINITY;
  d_values.upload(values);
  kernels::flag_if_nonfinite(stream, {d_values.get(), n, flag.get()});
  SG_CUDA_CHECK(cudaStreamSynchronize(stream));
  EXPECT_EQ(flag.download()[0], 1);
}

}  // namespace
