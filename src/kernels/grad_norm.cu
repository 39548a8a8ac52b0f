#include "kernels/grad_norm.h"

#include <cub/block/block_reduce.cuh>

#include "core/error.h"
#include "core/strings.h"
#include "cuda/check.h"

namespace sg::kernels {
namespace {

constexpr int kPartialThreads = 256;

__device__ __forceinline__ double widen(float g) { return g; }
__device__ __forceinline__ double widen(bf16 g) { return __bfloat162float(g); }

// Block b sums g^2 over the fixed strided subset {b*256 + tid + k*1024*256}.
template <class GradT>
__global__ void __launch_bounds__(kPartialThreads)
    grad_sumsq_partials_kernel(const GradT* __restrict__ grads, int64_t n, double* __restrict__ partials) {
  using BlockReduce = cub::BlockReduce<double, kPartialThreads>;
  __shared__ typename BlockReduce::TempStorage reduce_storage;
  const int64_t stride = static_cast<int64_t>(kGradNormPartials) * kPartialThreads;
  double local = 0.0;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * kPartialThreads + threadIdx.x; i < n; i += stride) {
    const double g = widen(grads[i]);
    local += g * g;
  }
  const double block_sum = BlockReduce(reduce_storage).Sum(local);
  if (threadIdx.x == 0) partials[blockIdx.x] = block_sum;
}

}  // namespace

void grad_norm_partials(cudaStream_t stream, const GradNormPartialsParams& p) {
  SG_CHECK(p.n >= 0, strprintf("grad_norm_partials: n=%lld must be >= 0", (long long)p.n));
  SG_CHECK((p.grads.data || p.n == 0) && p.partials, "grad_norm_partials: grads and partials must be device pointers");
  if (p.grads.is_bf16()) {
    grad_sumsq_partials_kernel<<<kGradNormPartials, kPartialThreads, 0, stream>>>(
        static_cast<const bf16*>(p.grads.data), p.n, p.partials);
  } else {
    grad_sumsq_partials_kernel<<<kGradNormPartials, kPartialThreads, 0, stream>>>(
        static_cast<const float*>(p.grads.data), p.n, p.partials);
  }
  SG_CUDA_CHECK_LAUNCH("grad_sumsq_partials_kernel");
}

}  // namespace sg::kernels
