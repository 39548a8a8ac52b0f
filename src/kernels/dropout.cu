#include "kernels/dropout.h"

#include <algorithm>

#include "core/error.h"
#include "core/strings.h"
#include "cuda/check.h"
#include "kernels/common.cuh"

namespace sg::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 1 << 16;  // grid-stride beyond this

// One thread per group of 4 consecutive elements: one Philox call gives the 4 words that
// rng::philox_bits returns for indices 4g..4g+3 (rng::philox_counter and the same key), so the mask is
// bitwise the CPU's.
__global__ void __launch_bounds__(kThreads)
    dropout_kernel(bf16* out, const bf16* in, const rng::RngState* state, int64_t n, float p, uint32_t site) {
  const uint64_t seed = state->seed;
  const uint64_t offset = state->offset;
  const float scale = 1.0f / (1.0f - p);
  const int64_t groups = (n + 3) / 4;
  for (int64_t g = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; g < groups;
       g += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const auto block = static_cast<uint64_t>(g);
    const rng::Philox4x32Counter words =
        rng::philox4x32_10(rng::philox_counter(block, site, offset),
                           rng::Philox4x32Key{{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32)}});
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const int64_t i = 4 * g + k;
      if (i < n) {
        const float u = static_cast<float>(words.v[k] >> 8) * (1.0f / 16777216.0f);
        const float v = __bfloat162float(in[i]);
        out[i] = __float2bfloat16_rn(u >= p ? v * scale : 0.0f);
      }
    }
  }
}

void launch(cudaStream_t stream, const char* op, bf16* out, const bf16* in, const rng::RngState* state, int64_t n,
            float p, uint32_t site) {
  SG_CHECK(out && in && state, strprintf("%s: null pointer in params", op));
  SG_CHECK(n >= 0, strprintf("%s: n = %lld must be >= 0", op, static_cast<long long>(n)));
  SG_CHECK(p >= 0.0f && p < 1.0f, strprintf("%s: p = %g must be in [0, 1)", op, static_cast<double>(p)));
  if (n == 0) return;
  if (p == 0.0f) {
    if (out != in) {
      SG_CUDA_CHECK(cudaMemcpyAsync(out, in, static_cast<size_t>(n) * sizeof(bf16), cudaMemcpyDeviceToDevice, stream));
    }
    return;
  }
  const auto blocks = static_cast<unsigned>(std::clamp<int64_t>(detail::ceil_div((n + 3) / 4, kThreads), 1, kMaxBlocks));
  dropout_kernel<<<blocks, kThreads, 0, stream>>>(out, in, state, n, p, site);
  SG_CUDA_CHECK_LAUNCH("dropout_kernel");
}

}  // namespace

void dropout_forward(cudaStream_t stream, const DropoutForwardParams& p) {
  launch(stream, "dropout_forward", p.out, p.in, p.state, p.n, p.p, p.site);
}

void dropout_backward(cudaStream_t stream, const DropoutBackwardParams& p) {
  launch(stream, "dropout_backward", p.din, p.dout, p.state, p.n, p.p, p.site);
}

}  // namespace sg::kernels
