#pragma once
// CPU twin of src/kernels/column_sums (the bias gradient of a linear layer): the column sums of a strided
// [rows, cols] matrix, in double, ADDED into a destination and rounded to float once.
#include <cstdint>

namespace sg::ref {

// dst[c] += sum_{r < rows} in[r * row_stride + c] for c < cols (row_stride >= cols). rows may be 0 (dst keeps its
// values).
void column_sums(float* dst, const float* in, int64_t rows, int64_t cols, int64_t row_stride);

}  // namespace sg::ref
