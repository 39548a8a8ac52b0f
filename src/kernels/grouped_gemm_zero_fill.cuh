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
// empty expert it only reads the counts; with many, every thread helps zero each one.
__device__ __forceinline__ void zero_empty_group_weight_grads(float* dw, const int32_t* counts,
                                                              const int32_t* offsets, int num_groups,
                                                              int64_t max_rows, int64_t group_elems, int64_t thread,
                                                              int64_t threads) {
  const int64_t vecs = group_elems / 4;
  const float4 zero = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  for (int g = 0; g < num_groups; ++g) {
    // Uniform across the grid: every thread reads the same count (an L1 broadcast).
    if (clamped_group_segment(counts, offsets, g, max_rows).rows != 0) continue;
    float4* out = reinterpret_cast<float4*>(dw + g * group_elems);
    for (int64_t i = thread; i < vecs; i += threads) out[i] = zero;
  }
}

}  // namespace sg::kernels::detail
