#include "kernels/swiglu.h"

#include <algorithm>

#include "core/error.h"
#include "core/strings.h"
#include "cuda/check.h"
#include "kernels/common.cuh"

namespace sg::kernels {
namespace {

using detail::kBf16PerVec;
using detail::load_bf16;
using detail::store_bf16;

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 1 << 16;  // grid-stride beyond this

__device__ __forceinline__ float sigmoid(float g) { return 1.0f / (1.0f + expf(-g)); }

// One thread per VEC-chunk of out (grid-stride): chunk -> (row t, column j).
template <int VEC>
__global__ void __launch_bounds__(kThreads) swiglu_forward_kernel(SwiGluForwardParams p) {
  const int64_t chunks_per_row = p.F / VEC;
  const int64_t total = p.T * chunks_per_row;
  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < total;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t t = idx / chunks_per_row;
    const int64_t j = (idx - t * chunks_per_row) * VEC;
    const bf16* gate = p.gate_up + t * 2 * p.F + j;
    float g[VEC], u[VEC];
    load_bf16<VEC>(gate, g);
    load_bf16<VEC>(gate + p.F, u);
#pragma unroll
    for (int k = 0; k < VEC; ++k) g[k] = g[k] * sigmoid(g[k]) * u[k];
    store_bf16<VEC>(p.out + t * p.F + j, g);
  }
}

template <int VEC>
__global__ void __launch_bounds__(kThreads) swiglu_backward_kernel(SwiGluBackwardParams p) {
  const int64_t chunks_per_row = p.F / VEC;
  const int64_t total = p.T * chunks_per_row;
  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < total;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t t = idx / chunks_per_row;
    const int64_t j = (idx - t * chunks_per_row) * VEC;
    const bf16* gate = p.gate_up + t * 2 * p.F + j;
    float g[VEC], u[VEC], dy[VEC], dg[VEC], du[VEC];
    load_bf16<VEC>(gate, g);
    load_bf16<VEC>(gate + p.F, u);
    load_bf16<VEC>(p.dout + t * p.F + j, dy);
#pragma unroll
    for (int k = 0; k < VEC; ++k) {
      const float sig = sigmoid(g[k]);
      dg[k] = dy[k] * u[k] * sig * (1.0f + g[k] * (1.0f - sig));
      du[k] = dy[k] * g[k] * sig;
    }
    bf16* dgate = p.dgate_up + t * 2 * p.F + j;
    store_bf16<VEC>(dgate, dg);
    store_bf16<VEC>(dgate + p.F, du);
  }
}

void check_shape(const char* op, int64_t T, int64_t F) {
  SG_CHECK(T >= 0 && F > 0, strprintf("%s: bad shape T=%lld F=%lld (T >= 0, F > 0)", op, static_cast<long long>(T),
                                      static_cast<long long>(F)));
}

unsigned grid_for(int64_t chunks) {
  return static_cast<unsigned>(std::clamp<int64_t>(detail::ceil_div(chunks, kThreads), 1, kMaxBlocks));
}

}  // namespace

void swiglu_forward(cudaStream_t stream, const SwiGluForwardParams& p) {
  check_shape("swiglu_forward", p.T, p.F);
  SG_CHECK(p.out && p.gate_up, "swiglu_forward: null pointer in params");
  if (p.T == 0) return;
  const bool vec = p.F % kBf16PerVec == 0 && detail::is_aligned(p.out, 16) && detail::is_aligned(p.gate_up, 16);
  if (vec) {
    swiglu_forward_kernel<kBf16PerVec><<<grid_for(p.T * p.F / kBf16PerVec), kThreads, 0, stream>>>(p);
  } else {
    swiglu_forward_kernel<1><<<grid_for(p.T * p.F), kThreads, 0, stream>>>(p);
  }
  SG_CUDA_CHECK_LAUNCH("swiglu_forward_kernel");
}

void swiglu_backward(cudaStream_t stream, const SwiGluBackwardParams& p) {
  check_shape("swiglu_backward", p.T, p.F);
  SG_CHECK(p.dgate_up && p.dout && p.gate_up, "swiglu_backward: null pointer in params");
  if (p.T == 0) return;
  const bool vec = p.F % kBf16PerVec == 0 && detail::is_aligned(p.dgate_up, 16) && detail::is_aligned(p.dout, 16) &&
                   detail::is_aligned(p.gate_up, 16);
  if (vec) {
    swiglu_backward_kernel<kBf16PerVec><<<grid_for(p.T * p.F / kBf16PerVec), kThreads, 0, stream>>>(p);
  } else {
    swiglu_backward_kernel<1><<<grid_for(p.T * p.F), kThreads, 0, stream>>>(p);
  }
  SG_CUDA_CHECK_LAUNCH("swiglu_backward_kernel");
}

}  // namespace sg::kernels
