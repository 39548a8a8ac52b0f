#pragma once
// CPU twin of src/kernels/column_sums (the bias gradient of a linear layer, or with row scales the weight gradient
// of a [1, cols] gate): the column sums of a strided [rows, cols] matrix, in double, ADDED into a destination and
// rounded to float once.
#include <cstdint>

namespace sg::ref {

// dst[c] += sum_{r < rows} row_scale[r] * in[r * row_stride + c] for c < cols (row_stride >= cols; a null row_scale
// scales every row by 1). rows may be 0 (dst keeps its values).
void column_sums(float* dst, const float* in, int64_t rows, int64_t cols, int64_t row_stride,
                 const float* row_scale = nullptr);

}  // namespace sg::ref
