#include "kernels/grad_norm.h"

#include <cub/block/block_reduce.cuh>

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/strings.h"
#include "cuda/check.h"

namespace sg::kernels {
namespace {

constexpr int kPartialThreads = 256;
constexpr int kFinalThreads = kGradNormPartials;  // one partial per thread in the final stage
constexpr int kFlagThreads = 256;

// Stage 1: block b sums g^2 over the fixed strided subset {b*256 + tid + k*1024*256}.
__global__ void __launch_bounds__(kPartialThreads)
    grad_sumsq_partials_kernel(const float* __restrict__ grads, int64_t n, double* __restrict__ partials) {
  using BlockReduce = cub::BlockReduce<double, kPartialThreads>;
  __shared__ typename BlockReduce::TempStorage reduce_storage;
  const int64_t stride = static_cast<int64_t>(kGradNormPartials) * kPartialThreads;
  double local = 0.0;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kPartialThreads + threadIdx.x; i < n; i += stride) {
    const double g = grads[i];
    local += g * g;
  }
  const double block_sum = BlockReduce(reduce_storage).Sum(local);
  if (threadIdx.x == 0) partials[blockIdx.x] = block_sum;
}

// Stage 2: fixed-order reduction of the partials, then norm, clip coefficient and flag.
__global__ void __launch_bounds__(kFinalThreads)
    grad_norm_finalize_kernel(const double* __restrict__ partials, float* __restrict__ norm_out,
                              float* __restrict__ clip_out, int* __restrict__ nonfinite_flag, float max_norm) {
  using BlockReduce = cub::BlockReduce<double, kFinalThreads>;
  __shared__ typename BlockReduce::TempStorage reduce_storage;
  const double total = BlockReduce(reduce_storage).Sum(partials[threadIdx.x]);
  if (threadIdx.x == 0) {
    const float norm = static_cast<float>(sqrt(total));
    *norm_out = norm;
    float coef = 1.0f;
    if (max_norm > 0.0f && isfinite(norm)) {  // a non-finite norm -> 1, like ref::clip_coefficient
      const float c = max_norm / (norm + 1e-6f);
      coef = c < 1.0f ? c : 1.0f;
    }
    *clip_out = coef;
    if (!isfinite(norm)) *nonfinite_flag = 1;
  }
}

__global__ void __launch_bounds__(kFlagThreads)
    flag_if_nonfinite_kernel(const float* __restrict__ values, int64_t n, int* __restrict__ flag) {
  // Every writer writes the same value 1, so the result does not depend on the order.
  const int64_t stride = static_cast<int64_t>(gridDim.x) * kFlagThreads;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kFlagThreads + threadIdx.x; i < n; i += stride) {
    if (!isfinite(values[i])) *flag = 1;
  }
}

}  // namespace

void grad_norm_partials(cudaStream_t stream, const GradNormParams& p) {
  SG_CHECK(p.n >= 0, strprintf("grad_norm_partials: n=%lld must be >= 0", (long long)p.n));
  SG_CHECK((p.grads || p.n == 0) && p.partials, "grad_norm_partials: grads and partials must be device pointers");
  grad_sumsq_partials_kernel<<<kGradNormPartials, kPartialThreads, 0, stream>>>(p.grads, p.n, p.partials);
  SG_CUDA_CHECK_LAUNCH("grad_sumsq_partials_kernel");
}

void grad_norm_finalize(cudaStream_t stream, const GradNormParams& p) {
  SG_CHECK(p.partials && p.norm && p.clip_coefficient && p.nonfinite_flag,
           "grad_norm_finalize: partials, norm, clip_coefficient and nonfinite_flag must be device pointers");
  grad_norm_finalize_kernel<<<1, kFinalThreads, 0, stream>>>(p.partials, p.norm, p.clip_coefficient,
                                                             p.nonfinite_flag, p.max_norm);
  SG_CUDA_CHECK_LAUNCH("grad_norm_finalize_kernel");
}

void grad_global_norm(cudaStream_t stream, const GradNormParams& p) {
  grad_norm_partials(stream, p);
  grad_norm_finalize(stream, p);
}

void flag_if_nonfinite(cudaStream_t stream, const NonfiniteCheckParams& p) {
  SG_CHECK(p.n >= 0 && (p.values || p.n == 0) && p.flag,
           "flag_if_nonfinite: values and flag must be device pointers, n >= 0");
  if (p.n == 0) return;
  const int64_t blocks = std::min<int64_t>((p.n + kFlagThreads - 1) / kFlagThreads, 1024);
  flag_if_nonfinite_kernel<<<static_cast<unsigned>(blocks), kFlagThreads, 0, stream>>>(p.values, p.n, p.flag);
  SG_CUDA_CHECK_LAUNCH("flag_if_nonfinite_kernel");
}

}  // namespace sg::kernels
