#pragma once
// Deterministic weight-gradient reduction shared by the backward kernels: a kernel writes one fp32 row of
// partial sums per block (or per fixed slot) into a scratch matrix [rows, cols]; this launcher ADDS the
// column sums into one or more main-grad arrays (fp32, or bf16: the sum added to the widened value and rounded
// to nearest even once), summing the rows in a fixed order (no atomics), so
// the bits depend on the shape only. The columns of a partial row may feed several destinations
// (segments, in order): e.g. a conv's [C*4 weight | C bias] row feeds dweight then dbias.
// Graph-safe: one kernel launch, no allocation, no host reads of device memory.
#include <cuda_runtime.h>

#include <cstdint>
#include <initializer_list>

#include "kernels/float_buffer.h"

namespace sg::kernels {

// One destination: dst[0, cols) += the next `cols` column sums.
struct ColumnSumSegment {
  FloatBuffer dst;
  int64_t cols = 0;
};
inline constexpr int kMaxColumnSumSegments = 4;

// dst_s[j] += sum_{r < rows} partials[r * ld + col_s + j] for each segment s (col_s: the segments' running
// offset). The row stride `ld` is the sum of the segments' cols. rows may be 0 (nothing is added).
void add_partial_column_sums(cudaStream_t stream, const float* partials, int64_t rows,
                             std::initializer_list<ColumnSumSegment> segments);

// `count` partial matrices [rows, cols] stacked in `partials` (matrix k at partials + k * rows * cols),
// each summed per column in the same fixed order as above and ADDED into dst_base + dst_offsets[k]
// (dst_offsets: a DEVICE array of count element offsets). One launch for many small reductions, e.g.
// the weight gradients of every RMSNorm of the step (model/train_step.h), into a main_grad of either dtype
// (a bf16 one rounded to nearest even after the add). count or rows may be 0.
void add_partial_column_sums_batched(cudaStream_t stream, const float* partials, int64_t rows, int64_t cols,
                                     int64_t count, FloatBuffer dst_base, const int64_t* dst_offsets);

}  // namespace sg::kernels
