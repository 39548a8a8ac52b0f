#pragma once
// Column sums of a bf16 matrix ADDED into a main gradient: the bias gradient of a linear layer
// (CPU twin: reference/column_sums.h), e.g. Qwen2's QKV bias (add_qkv_bias):
//   dst[c] += sum_{r < rows} in[r * row_stride + c]   for c < cols
// `in` is the output gradient [rows = tokens, cols] seen as strided rows (row_stride: 0 = packed, or >= cols).
// With row_scale, each row is first scaled by its fp32 factor: dst[c] += sum_r row_scale[r] * in[r, c], the product
// rounded to fp32 before it joins the same ordered sum (the weight gradient of a [1, cols] gate such as MoE's
// shared_expert_gate: dw += sum_t d_logit[t] * x[t], kernels/moe_shared_gate.h).
// Kernels: column_sums.cuh (also run by the CPU emulator of the tests).
//
// Why not CUB: it has no strided column reduction that is graph-safe with a fixed summation order (its segmented
// reduce sums contiguous segments, so a column would be read uncoalesced through a strided iterator or after a
// transposed copy, with a temp-storage query and an order tuned per architecture; float atomics would make the
// bits depend on scheduling). Here a fixed number of row slots (a function of rows) each sum their rows in
// order in fp32 registers; the 8 slots of a block are added in order into one partial row of the scratch
// [column_sums_num_partials(rows), cols], whose rows are then added in order into dst (kernels/partial_sums.h):
// no atomics, the bits depend on the shape only (not on the row stride, the alignment or the GPU).
// Graph-safe: no allocation, no sync, no host reads of device memory.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "cuda/bf16.h"
#include "kernels/float_buffer.h"

namespace sg::kernels {

struct ColumnSumsParams {
  FloatBuffer dst;           // [cols] main_grad (fp32 or bf16: the fp32 sum added and rounded once), ADDED into
  float* scratch = nullptr;  // fp32 [column_sums_num_partials(rows), cols]
  size_t scratch_bytes = 0;  // size of `scratch` (checked >= column_sums_scratch_bytes(rows, cols))
  const bf16* in = nullptr;  // row r at in + r * row_stride
  int64_t rows = 0, cols = 0;
  int64_t row_stride = 0;  // 0 (packed: cols) or >= cols
  const float* row_scale = nullptr;  // fp32 [rows] or null (every row's scale is 1: the bits of the unscaled sum)
};
// rows may be 0 (nothing is added; in, row_scale and scratch are not read and may be null). dst must not overlap in,
// row_scale or scratch.
void column_sums(cudaStream_t stream, const ColumnSumsParams& p);

int64_t column_sums_num_partials(int64_t rows);  // a function of rows only; 0 when rows == 0
size_t column_sums_scratch_bytes(int64_t rows, int64_t cols);

}  // namespace sg::kernels
