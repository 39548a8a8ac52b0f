#include "kernels/swiglu.h"

#include <algorithm>

#include "core/error.h"
#include "core/strings.h"
#include "cuda/check.h"
#include "kernels/common.cuh"
#include "kernels/silu.cuh"

// Memory-bound elementwise passes: forward reads 2F and writes F bf16 per row (6F bytes), backward reads
// 3F and writes 2F (10F bytes). What keeps them from the DRAM roofline is issue work per 16-byte chunk:
// sigmoid through the hardware exp and reciprocal (kernels/silu.cuh), and the chunk -> (row, column)
// division in 32 bits (Index = uint32_t) whenever the chunk count allows, instead of a 64-bit division
// (a ~70-instruction subroutine) per chunk. One chunk per thread (grid_for: a block of 256 threads per
// 256 chunks); a resident SM then has 2048 threads x 32-48 bytes of loads in flight, above the ~30 KB
// per SM that HBM3e's bandwidth-latency product asks for.
namespace sg::kernels {
namespace {

using detail::kBf16PerVec;
using detail::load_bf16;
using detail::sigmoid;
using detail::store_bf16;
using detail::swiglu;

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 1 << 16;  // grid-stride beyond this

// One thread per VEC-chunk of out (grid-stride): chunk -> (row t, column j). The expressions are the CPU
// twin's (reference/swiglu.cpp), with sigmoid from kernels/silu.cuh.
template <int VEC, class Index>
__global__ void __launch_bounds__(kThreads) swiglu_forward_kernel(SwiGluForwardParams p) {
  const auto chunks_per_row = static_cast<Index>(p.F / VEC);
  const auto total = static_cast<Index>(p.T) * chunks_per_row;
  for (Index idx = static_cast<Index>(blockIdx.x) * blockDim.x + threadIdx.x; idx < total;
       idx += static_cast<Index>(gridDim.x) * blockDim.x) {
    const int64_t t = idx / chunks_per_row;
    const int64_t j = static_cast<int64_t>(idx - static_cast<Index>(t) * chunks_per_row) * VEC;
    const bf16* gate = p.gate_up + t * 2 * p.F + j;
    float g[VEC], u[VEC];
    load_bf16<VEC>(gate, g);
    load_bf16<VEC>(gate + p.F, u);
#pragma unroll
    for (int k = 0; k < VEC; ++k) g[k] = swiglu(g[k], u[k]);
    store_bf16<VEC>(p.out + t * p.F + j, g);
  }
}

template <int VEC, class Index>
__global__ void __launch_bounds__(kThreads) swiglu_backward_kernel(SwiGluBackwardParams p) {
  const auto chunks_per_row = static_cast<Index>(p.F / VEC);
  const auto total = static_cast<Index>(p.T) * chunks_per_row;
  for (Index idx = static_cast<Index>(blockIdx.x) * blockDim.x + threadIdx.x; idx < total;
       idx += static_cast<Index>(gridDim.x) * blockDim.x) {
    const int64_t t = idx / chunks_per_row;
    const int64_t j = static_cast<int64_t>(idx - static_cast<Index>(t) * chunks_per_row) * VEC;
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

// 32-bit chunk indices when the last index plus one grid stride stays below 2^32 (no wrap in the loop).
bool fits_32_bits(int64_t chunks) {
  return chunks + static_cast<int64_t>(kMaxBlocks) * kThreads < (int64_t{1} << 32);
}

template <class Params>
void launch(void (*kernel32)(Params), void (*kernel64)(Params), int64_t chunks, cudaStream_t stream,
            const Params& p) {
  (fits_32_bits(chunks) ? kernel32 : kernel64)<<<grid_for(chunks), kThreads, 0, stream>>>(p);
}

}  // namespace

void swiglu_forward(cudaStream_t stream, const SwiGluForwardParams& p) {
  check_shape("swiglu_forward", p.T, p.F);
  SG_CHECK(p.out && p.gate_up, "swiglu_forward: null pointer in params");
  if (p.T == 0) return;
  const bool vec = p.F % kBf16PerVec == 0 && detail::is_aligned(p.out, 16) && detail::is_aligned(p.gate_up, 16);
  if (vec) {
    launch(swiglu_forward_kernel<kBf16PerVec, uint32_t>, swiglu_forward_kernel<kBf16PerVec, int64_t>,
           p.T * p.F / kBf16PerVec, stream, p);
  } else {
    launch(swiglu_forward_kernel<1, uint32_t>, swiglu_forward_kernel<1, int64_t>, p.T * p.F, stream, p);
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
    launch(swiglu_backward_kernel<kBf16PerVec, uint32_t>, swiglu_backward_kernel<kBf16PerVec, int64_t>,
           p.T * p.F / kBf16PerVec, stream, p);
  } else {
    launch(swiglu_backward_kernel<1, uint32_t>, swiglu_backward_kernel<1, int64_t>, p.T * p.F, stream, p);
  }
  SG_CUDA_CHECK_LAUNCH("swiglu_backward_kernel");
}

}  // namespace sg::kernels
