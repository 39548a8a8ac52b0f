#include "kernels/moe_gating.h"

#include <algorithm>

#include "core/error.h"
#include "core/strings.h"
#include "cuda/check.h"
#include "kernels/common.cuh"

namespace sg::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 1 << 16;  // grid-stride beyond this

__global__ void __launch_bounds__(kThreads) widen_kernel(MoeGatingWidenParams p) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < p.n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    p.out[i] = __bfloat162float(p.in[i]);
  }
}

__global__ void __launch_bounds__(kThreads) add_grad_kernel(MoeGatingAddGradParams p) {
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < p.n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    p.dx[i] = __float2bfloat16(__bfloat162float(p.dx[i]) + p.add[i]);
  }
}

unsigned grid_for(int64_t n) {
  return static_cast<unsigned>(std::clamp<int64_t>(detail::ceil_div(n, kThreads), 1, kMaxBlocks));
}

}  // namespace

void moe_gating_widen(cudaStream_t stream, const MoeGatingWidenParams& p) {
  SG_CHECK(p.n >= 0, strprintf("moe_gating_widen: n = %lld must not be negative", static_cast<long long>(p.n)));
  SG_CHECK(p.out && p.in, "moe_gating_widen: null pointer in params");
  if (p.n == 0) return;
  widen_kernel<<<grid_for(p.n), kThreads, 0, stream>>>(p);
  SG_CUDA_CHECK(cudaGetLastError());
}

void moe_gating_add_grad(cudaStream_t stream, const MoeGatingAddGradParams& p) {
  SG_CHECK(p.n >= 0, strprintf("moe_gating_add_grad: n = %lld must not be negative", static_cast<long long>(p.n)));
  SG_CHECK(p.dx && p.add, "moe_gating_add_grad: null pointer in params");
  if (p.n == 0) return;
  add_grad_kernel<<<grid_for(p.n), kThreads, 0, stream>>>(p);
  SG_CUDA_CHECK(cudaGetLastError());
}

}  // namespace sg::kernels
