#pragma once
// Internal to kernels/grouped_gemm: what GroupedLinearBackwardWeight in overwrite mode (accumulate = false)
// owes the empty experts. The CUTLASS grouped GEMM gives an empty expert zero tiles (its reduction length
// is 0, see grouped_gemm_cutlass.cuh), so it never writes that expert's dW; overwriting must still leave
// dW_g = 0 there. The extra blocks of the setup launch run this before the GEMM (stream order), reading
// the device counts/offsets (no host read: the same launch eager and in graph capture), so overwriting
// costs no launch of its own. It writes only the dW of experts whose clamped segment
// (grouped_gemm_segment.cuh) is empty, which the GEMM never touches (disjoint outputs, plain stores).
#include <cstdint>

#include "kernels/grouped_gemm_segment.cuh"

namespace sg::kernels::detail {

// Threads of one grid share the work: thread `thread` of `threads` zeroes every `threads`-th 16 bytes of
// each empty expert's dW_g ([group_bytes] bytes of fp32 or bf16, a multiple of 16; dw 16-byte aligned). With no
// empty expert it only reads the counts; with many, every thread helps zero each one. Each warp reads 32
// experts' segments at once (lane l: expert base + l) and votes, so finding the empty experts costs one
// memory round trip per 32 experts, not one per expert (a loop over the experts that may store to dW
// between its loads cannot overlap them). Every thread of a warp must call it (full warps: the ballot).
__device__ __forceinline__ void zero_empty_group_weight_grads(void* dw, const int32_t* counts,
                                                              const int32_t* offsets, int num_groups,
                                                              int64_t max_rows, int64_t group_bytes, int64_t thread,
                                                              int64_t threads) {
  const int64_t vecs = group_bytes / 16;
  const uint4 zero = make_uint4(0u, 0u, 0u, 0u);
  const int lane = static_cast<int>(threadIdx.x % 32);
  for (int base = 0; base < num_groups; base += 32) {
    const int g = base + lane;
    const bool empty = g < num_groups && clamped_group_segment(counts, offsets, g, max_rows).rows == 0;
    // Uniform across the grid: every warp computes the same mask, in expert order.
    for (unsigned mask = __ballot_sync(0xffffffffu, empty); mask != 0; mask &= mask - 1) {
      uint4* out = reinterpret_cast<uint4*>(static_cast<unsigned char*>(dw) + (base + __ffs(mask) - 1) * group_bytes);
      for (int64_t i = thread; i < vecs; i += threads) out[i] = zero;
    }
  }
}

}  // namespace sg::kernels::detail
