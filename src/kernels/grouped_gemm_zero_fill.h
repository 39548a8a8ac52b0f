#pragma once
// Internal to kernels/grouped_gemm: the second launch of GroupedLinearBackwardWeight in overwrite mode
// (accumulate = false). The CUTLASS grouped GEMM gives an empty expert zero tiles (its reduction length is
// 0, see grouped_gemm_cutlass.cuh), so it never writes that expert's dW; overwriting must still leave
// dW_g = 0 there. This kernel reads the device counts/offsets (no host read: the same launch eager and in
// graph capture) and zeroes dW_g of every expert whose clamped segment (grouped_gemm_segment.cuh) is
// empty; it writes nothing else, so it is independent of the GEMM (disjoint outputs, plain stores).
#include <cuda_runtime.h>

#include <cstdint>

namespace sg::kernels::detail {

struct ZeroEmptyGroupWeightGradsParams {
  float* dw = nullptr;               // [num_groups, group_elems], 16-byte aligned
  const int32_t* counts = nullptr;   // [num_groups] device
  const int32_t* offsets = nullptr;  // [num_groups] device
  int num_groups = 0;
  int64_t max_total_rows = 0;
  int64_t group_elems = 0;  // N * K, a multiple of 4 (N and K are multiples of 8)
};

// A fixed grid (a few blocks per SM) that walks all experts: with no empty expert it only reads the
// counts; with many, every block helps zero each one, so any number of empty experts runs at full width.
void zero_empty_group_weight_grads(cudaStream_t stream, const ZeroEmptyGroupWeightGradsParams& p);

}  // namespace sg::kernels::detail
