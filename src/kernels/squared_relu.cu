#include "kernels/squared_relu.h"

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

// One thread per VEC values (grid-stride). BACKWARD: dst = dout * 2 relu(in); else dst = relu(in)^2.
template <int VEC, bool BACKWARD>
__global__ void __launch_bounds__(kThreads) squared_relu_kernel(bf16* dst, const bf16* in, const bf16* dout,
                                                                int64_t n) {
  const int64_t chunks = n / VEC;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < chunks;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    float x[VEC];
    load_bf16<VEC>(in + i * VEC, x);
    if constexpr (BACKWARD) {
      float g[VEC];
      load_bf16<VEC>(dout + i * VEC, g);
#pragma unroll
      for (int k = 0; k < VEC; ++k) x[k] = g[k] * (2.0f * fmaxf(x[k], 0.0f));
    } else {
#pragma unroll
      for (int k = 0; k < VEC; ++k) {
        const float r = fmaxf(x[k], 0.0f);
        x[k] = r * r;
      }
    }
    store_bf16<VEC>(dst + i * VEC, x);
  }
}

template <bool BACKWARD>
void launch(cudaStream_t stream, const char* op, bf16* dst, const bf16* in, const bf16* dout, int64_t T, int64_t F) {
  SG_CHECK(T >= 0 && F > 0, strprintf("%s: bad shape T=%lld F=%lld (T >= 0, F > 0)", op, static_cast<long long>(T),
                                      static_cast<long long>(F)));
  SG_CHECK(dst && in && (!BACKWARD || dout), strprintf("%s: null pointer in params", op));
  const int64_t n = T * F;
  if (n == 0) return;
  const bool vec = n % kBf16PerVec == 0 && detail::is_aligned(dst, 16) && detail::is_aligned(in, 16) &&
                   (!BACKWARD || detail::is_aligned(dout, 16));
  const int64_t chunks = vec ? n / kBf16PerVec : n;
  const auto blocks = static_cast<unsigned>(std::clamp<int64_t>(detail::ceil_div(chunks, kThreads), 1, kMaxBlocks));
  if (vec) {
    squared_relu_kernel<kBf16PerVec, BACKWARD><<<blocks, kThreads, 0, stream>>>(dst, in, dout, n);
  } else {
    squared_relu_kernel<1, BACKWARD><<<blocks, kThreads, 0, stream>>>(dst, in, dout, n);
  }
  SG_CUDA_CHECK_LAUNCH("squared_relu_kernel");
}

}  // namespace

void squared_relu_forward(cudaStream_t stream, const SquaredReluForwardParams& p) {
  launch<false>(stream, "squared_relu_forward", p.out, p.in, nullptr, p.T, p.F);
}

void squared_relu_backward(cudaStream_t stream, const SquaredReluBackwardParams& p) {
  launch<true>(stream, "squared_relu_backward", p.din, p.in, p.dout, p.T, p.F);
}

}  // namespace sg::kernels
