// GPU grad-norm stage 1 (the per-block sums of squares) against reference/grad_norm: the partials, added
// in the order of the stage-2 kernel (ref::sum_norm_partials; optimizer_step_scalars_gpu_test.cu checks
// that kernel), give the norm of ref::grad_global_norm within 1e-6 relative (an fp64 sum rounded to fp32,
// tighter than kFp32RelTol). The partials are poisoned first; a second run is bitwise identical.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "cuda/stream.h"
#include "gpu_test_util.h"
#include "kernels/grad_norm.h"
#include "reference/grad_norm.h"
#include "reference/optimizer_step_scalars.h"

namespace {

using namespace sg;
using namespace sg::test;

template <class GradT>
std::vector<double> run_partials(const DeviceBuffer<GradT>& grads, int64_t n) {
  DeviceBuffer<double> partials(kernels::kGradNormPartials);
  partials.poison();
  cuda::Stream stream;
  kernels::grad_norm_partials(stream, {.grads = grads.get(), .n = n, .partials = partials.get()});
  SG_CUDA_CHECK(cudaStreamSynchronize(stream));
  return partials.download();
}

double norm_of(const std::vector<double>& partials) {
  return std::sqrt(ref::sum_norm_partials(partials.data(), static_cast<int64_t>(partials.size())));
}

class GradNormGpu : public ::testing::TestWithParam<int64_t> {};

TEST_P(GradNormGpu, PartialsGiveReferenceNormAndAreDeterministic) {
  const int64_t n = GetParam();
  const std::vector<float> grads = random_normal(n, 300 + n, 1e-3f);
  DeviceBuffer<float> d_grads(n);
  d_grads.upload(grads);
  const std::vector<double> partials = run_partials(d_grads, n);
  for (const double p : partials) ASSERT_TRUE(std::isfinite(p) && p >= 0.0) << "n=" << n << ": partial " << p;
  const double ref_norm = ref::grad_global_norm(grads.data(), n);
  const float norm = static_cast<float>(norm_of(partials));
  EXPECT_NEAR(norm, ref_norm, 1e-6 * ref_norm + 1e-30) << "n=" << n;
  const std::vector<double> again = run_partials(d_grads, n);
  EXPECT_EQ(std::memcmp(partials.data(), again.data(), partials.size() * sizeof(double)), 0) << "n=" << n;
}

// bf16 main gradients (ddp.grad_reduce_in_fp32=false): widened exactly, so the norm is the reference norm of
// the rounded values, to the same 1e-6.
TEST_P(GradNormGpu, Bf16GradientsGiveTheNormOfTheRoundedValues) {
  const int64_t n = GetParam();
  const std::vector<float> grads = round_bf16(random_normal(n, 400 + n, 1e-3f));
  DeviceBuffer<bf16> d_grads(n);
  d_grads.upload(to_bf16(grads));
  const std::vector<double> partials = run_partials(d_grads, n);
  const double ref_norm = ref::grad_global_norm(grads.data(), n);
  EXPECT_NEAR(static_cast<float>(norm_of(partials)), ref_norm, 1e-6 * ref_norm + 1e-30) << "n=" << n;
}

INSTANTIATE_TEST_SUITE_P(Sizes, GradNormGpu,
                         ::testing::Values(int64_t{0}, int64_t{1}, int64_t{1003}, int64_t{262144},
                                           int64_t{(1 << 20) + 3}, int64_t{50000017}));

TEST(GradNormGpuNonfinite, NonFiniteGradGivesNonFiniteNorm) {
  const int64_t n = 1003;
  for (const float bad : {NAN, INFINITY, -INFINITY}) {
    std::vector<float> grads = random_normal(n, 17);
    grads[n - 1] = bad;  // the last, non-multiple element: it must be visited
    DeviceBuffer<float> d_grads(n);
    d_grads.upload(grads);
    EXPECT_FALSE(std::isfinite(norm_of(run_partials(d_grads, n)))) << bad;
  }
}

}  // namespace
