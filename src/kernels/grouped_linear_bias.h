#pragma once
// The per-expert biases of the MoE layer's grouped linears (Megatron's add_bias_linear on the experts): group g owns
// rows [offsets[g], offsets[g] + counts[g]) of a [max_rows, cols] row buffer, as in kernels/grouped_gemm.h, with the
// counts and offsets on the device (graph-safe: the launch shapes depend on max_rows only).
//   forward:   y[r, :] = bf16(y[r, :] + bias[g, :]) for the rows r of every group g (fp32 add, one rounding);
//              rows outside every segment are not touched
//   backward:  dbias[g, :] += sum over group g's rows of dy[r, :] (fp32 sums ADDED into a main gradient, fp32 or
//              bf16 rounded once); a group without rows leaves its dbias row bit for bit unchanged
// CPU twin: reference/grouped_gemm.h (grouped_bias_forward, grouped_bias_backward). Kernels: grouped_linear_bias.cuh.
//
// Why a pass of its own rather than the grouped GEMM's epilogue: the CUTLASS grouped GEMM instantiations are few and
// slow to build, and a bias epilogue would double them; the add is one read and write of the GEMM's bf16 output.
// Why not CUB for the sums: its segmented reduce sums contiguous segments, not the columns of a row range, and
// float atomics would make the bits depend on scheduling. Here each group's rows are cut into chunks of
// kGroupedBiasChunkRows from the group's first row; a block sums one chunk's rows in a fixed order into one partial
// row of the scratch, and a second kernel adds each group's partial rows in order: the bits depend on the counts,
// the offsets and the data only. The forward's blocks take the same chunks (one group lookup per chunk, not per row).
// Segments must not overlap (the grouped GEMM's contract; the MoE dispatch never overlaps them).
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "cuda/bf16.h"
#include "kernels/float_buffer.h"

namespace sg::kernels {

inline constexpr int64_t kGroupedBiasChunkRows = 256;

struct GroupedBiasForwardParams {
  bf16* y = nullptr;                 // [max_rows, cols], updated in place in the groups' rows
  const bf16* bias = nullptr;        // [num_groups, cols]
  const int32_t* counts = nullptr;   // device [num_groups]
  const int32_t* offsets = nullptr;  // device [num_groups]
  int num_groups = 0;
  int64_t max_rows = 0, cols = 0;
};
// max_rows may be 0 (nothing is launched).
void grouped_bias_forward(cudaStream_t stream, const GroupedBiasForwardParams& p);

struct GroupedBiasBackwardParams {
  FloatBuffer dst;                   // [num_groups, cols] main gradient, ADDED into
  float* scratch = nullptr;          // fp32 [grouped_bias_num_partials(max_rows, num_groups), cols]
  size_t scratch_bytes = 0;          // checked >= grouped_bias_scratch_bytes(max_rows, num_groups, cols)
  const bf16* dy = nullptr;          // [max_rows, cols]
  const int32_t* counts = nullptr;   // device [num_groups]
  const int32_t* offsets = nullptr;  // device [num_groups]
  int num_groups = 0;
  int64_t max_rows = 0, cols = 0;
};
void grouped_bias_backward(cudaStream_t stream, const GroupedBiasBackwardParams& p);

// The most chunks the groups' rows can be cut into (each group's last chunk may be partial); 0 when max_rows == 0.
int64_t grouped_bias_num_partials(int64_t max_rows, int num_groups);
size_t grouped_bias_scratch_bytes(int64_t max_rows, int num_groups, int64_t cols);

}  // namespace sg::kernels
