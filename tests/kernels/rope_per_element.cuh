#pragma once
// The straightforward RoPE kernel the tiled one (src/kernels/rope.cuh) must reproduce bit for bit: one
// thread per (row, pair) computes the fp64 angle and sincos, rounds cos/sin to fp32 and rotates that pair
// of every head with scalar loads and stores (the algorithm the engine shipped before the tiled kernel).
// Written over the launch policy, so the GPU test runs it with detail::CudaLaunch and the emulated CPU test
// with sg::emu::Launch (define SG_SIMT_EMULATION first there). On the GPU the fp32 expressions are the old
// kernel's, left to nvcc's contraction like there; the emulated build spells that contraction out. Test
// code only: no checks beyond the kernel's own needs.
#include <cmath>
#include <cstdint>

#include "kernels/common.cuh"
#include "kernels/rope.h"
#include "reference/rope_frequencies.h"

namespace sg::test::rope_per_element {

inline constexpr int kThreads = 256;
inline constexpr int64_t kMaxBlocks = 1 << 16;

struct Args {
  kernels::RopeParams p;
  int64_t grid_threads = 0;
};

template <bool kInverse>
SG_KERNEL(kThreads) rope_per_element_kernel(Args a) {
  const kernels::RopeParams& p = a.p;
  const int64_t rotated = ref::rope_rotated_dims(p.head_dim, p.rotary_dim);
  const int64_t half = rotated / 2;
  const int64_t total = p.T * half;
  for (int64_t idx = static_cast<int64_t>(kernels::detail::block_index_x()) * kThreads +
                     kernels::detail::thread_index();
       idx < total; idx += a.grid_threads) {
    const int64_t t = idx / half;
    const int64_t i = idx - t * half;
    const double freq = ref::rope_inv_freq(i, rotated, p.base, p.scaling);
    const int64_t pos = p.positions != nullptr ? static_cast<int64_t>(p.positions[t]) : t % p.S;
    const double angle = static_cast<double>(pos) * freq;
    double s, c;
    sincos(angle, &s, &c);
    const double scale = p.scaling.attention_factor;  // LongRoPE's; 1 changes no bit
    const float cf = static_cast<float>(c * scale);
    const float sf = kInverse ? -static_cast<float>(s * scale) : static_cast<float>(s * scale);
    bf16* row = p.x + t * p.row_stride + i;
    for (int64_t h = 0; h < p.num_heads; ++h) {
      bf16* first = row + h * p.head_dim;
      bf16* second = first + half;
      const float x1 = __bfloat162float(*first);
      const float x2 = __bfloat162float(*second);
#if defined(SG_SIMT_EMULATION)
      // The host compiler does not contract; spell out what nvcc makes of the expressions below.
      *first = __float2bfloat16_rn(std::fma(x1, cf, -(x2 * sf)));
      *second = __float2bfloat16_rn(std::fma(x1, sf, x2 * cf));
#else
      *first = __float2bfloat16_rn(x1 * cf - x2 * sf);
      *second = __float2bfloat16_rn(x2 * cf + x1 * sf);
#endif
    }
  }
}

// Rotates like kernels::rope_forward (inverse = false) or rope_backward (inverse = true).
template <class Launch>
void run(const Launch& launch, const kernels::RopeParams& p, bool inverse) {
  const int64_t pairs = p.T * (ref::rope_rotated_dims(p.head_dim, p.rotary_dim) / 2);
  if (pairs == 0) return;
  int64_t blocks = kernels::detail::ceil_div(pairs, kThreads);
  blocks = blocks > kMaxBlocks ? kMaxBlocks : blocks;
  const Args a{.p = p, .grid_threads = blocks * kThreads};
  const dim3 grid(static_cast<unsigned>(blocks));
  if (inverse) {
    launch("rope_per_element_kernel<inverse>", rope_per_element_kernel<true>, grid, kThreads, 0, a);
  } else {
    launch("rope_per_element_kernel", rope_per_element_kernel<false>, grid, kThreads, 0, a);
  }
}

}  // namespace sg::test::rope_per_element
