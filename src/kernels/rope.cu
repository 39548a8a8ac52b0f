#include "kernels/rope.h"

#include <algorithm>

#include "core/error.h"
#include "core/strings.h"
#include "cuda/check.h"
#include "kernels/common.cuh"

namespace sg::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 1 << 16;  // grid-stride beyond this

// One thread per (row t, pair i): the angle is computed once and applied to every head of the row.
// Consecutive threads take consecutive pairs of one row, so each head's loads are coalesced.
template <bool kInverse>
__global__ void __launch_bounds__(kThreads) rope_kernel(RopeParams p) {
  const int64_t half = p.head_dim / 2;
  const int64_t total = p.T * half;
  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < total;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t t = idx / half;
    const int64_t i = idx - t * half;
    const double freq = ref::rope_inv_freq(i, p.head_dim, p.base, p.scaling);
    const int64_t pos = p.positions != nullptr ? static_cast<int64_t>(p.positions[t]) : t % p.S;
    const double angle = static_cast<double>(pos) * freq;
    double s, c;
    sincos(angle, &s, &c);
    const float cf = static_cast<float>(c);
    const float sf = kInverse ? -static_cast<float>(s) : static_cast<float>(s);
    bf16* row = p.x + t * p.row_stride + i;
    for (int64_t h = 0; h < p.num_heads; ++h) {
      bf16* a = row + h * p.head_dim;
      bf16* b = a + half;
      const float x1 = __bfloat162float(*a);
      const float x2 = __bfloat162float(*b);
      *a = __float2bfloat16_rn(x1 * cf - x2 * sf);
      *b = __float2bfloat16_rn(x2 * cf + x1 * sf);
    }
  }
}

void launch(cudaStream_t stream, const RopeParams& p, bool inverse) {
  const char* op = inverse ? "rope_backward" : "rope_forward";
  SG_CHECK(p.x != nullptr, strprintf("%s: null x", op));
  SG_CHECK(p.T >= 0 && (p.S > 0 || p.positions != nullptr) && p.num_heads > 0 && p.head_dim > 0 &&
               p.head_dim % 2 == 0 && p.row_stride >= p.num_heads * p.head_dim && p.base > 0.0,
           strprintf("%s: bad shape T=%lld S=%lld num_heads=%lld head_dim=%lld row_stride=%lld base=%g (need "
                     "S > 0 or positions, even head_dim, row_stride >= num_heads * head_dim, base > 0)",
                     op, static_cast<long long>(p.T), static_cast<long long>(p.S), static_cast<long long>(p.num_heads),
                     static_cast<long long>(p.head_dim), static_cast<long long>(p.row_stride), p.base));
  const ref::RopeScaling& sc = p.scaling;
  SG_CHECK(sc.valid(),
           strprintf("%s: Llama 3 RoPE scaling needs 0 < low_freq_factor < high_freq_factor and "
                     "original_max_position_embeddings > 0 (got %g, %g, %g)",
                     op, sc.low_freq_factor, sc.high_freq_factor, sc.original_max_position_embeddings));
  if (p.T == 0) return;
  const auto blocks =
      static_cast<unsigned>(std::clamp<int64_t>(detail::ceil_div(p.T * (p.head_dim / 2), kThreads), 1, kMaxBlocks));
  if (inverse) {
    rope_kernel<true><<<blocks, kThreads, 0, stream>>>(p);
    SG_CUDA_CHECK_LAUNCH("rope_kernel<inverse>");
  } else {
    rope_kernel<false><<<blocks, kThreads, 0, stream>>>(p);
    SG_CUDA_CHECK_LAUNCH("rope_kernel");
  }
}

}  // namespace

void rope_forward(cudaStream_t stream, const RopeParams& p) { launch(stream, p, false); }
void rope_backward(cudaStream_t stream, const RopeParams& p) { launch(stream, p, true); }

}  // namespace sg::kernels
