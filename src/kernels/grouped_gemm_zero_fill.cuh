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

// Threads of one grid share the work: thread `thread` of `threads` zeroes every `threads`-th float4 of
// each empty expert's dW_g ([group_elems] fp32, group_elems a multiple of 4, dw 16-byte aligned). With no
// empty expert it only reads the counts; with many, every thread helps zero each one. Each warp reads 32
// experts' segments at once (lane l: expert base + l) and votes, so finding the empty experts costs one
// memory round trip per 32 experts, not one per expert (a loop over the experts that may store to dW
// between its loads cannot overlap them). Every thread of a warp must call it (full warps: the ballot).
__device__ __forceinline__ void zero_empty_group_weight_grads(float* dw, const int32_t* counts,
                                                              const int32_t* offsets, int num_groups,
                                                              int64_t max_rows, int64_t group_elems, int64_t thread,
                                                              int64_t threads) {
  const int64_t vecs = group_elems / 4;
  const float4 zero = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  const int lane = static_cast<int>(threadIdx.x % 32);
  for (int base = 0; base < num_groups; base += 32) {
    const int g = base + lane;
    const bool empty = g < num_groups && clamped_group_segment(counts, offsets, g, max_rows).rows == 0;
    // Uniform across the grid: every warp computes the same mask, in expert order.
    for (unsigned mask = __ballot_sync(0xffffffffu, empty); mask != 0; mask &= mask - 1) {
      float4* out = reinterpret_cast<float4*>(dw + (base + __ffs(mask) - 1) * group_elems);
      for (int64_t i = thread; i < vecs; i += threads) out[i] = zero;
    }
  }
}

}  // namespace sg::kernels::detail
