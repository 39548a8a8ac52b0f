#pragma once
// CPU twin of kernels/partial_sums (the deterministic weight-gradient reduction): the column sums of a [rows, ld]
// fp32 partial matrix, in double, ADDED into a destination and rounded to float once.
#include <cstdint>

namespace sg::ref {

// dst[j] += sum_{r < rows} partials[r * ld + col + j] for j < cols. rows may be 0 (dst keeps its values).
void add_partial_column_sums(float* dst, const float* partials, int64_t rows, int64_t ld, int64_t col, int64_t cols);

}  // namespace sg::ref
