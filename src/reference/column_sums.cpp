#include "reference/column_sums.h"

#include <vector>

namespace sg::ref {

void column_sums(float* dst, const float* in, int64_t rows, int64_t cols, int64_t row_stride, const float* row_scale) {
  std::vector<double> sum(dst, dst + cols);  // in double: the reference's own rounding stays negligible
  for (int64_t r = 0; r < rows; ++r) {       // row by row: one pass over the matrix in memory order
    const float* row = in + r * row_stride;
    const double scale = row_scale != nullptr ? row_scale[r] : 1.0;  // float x float is exact in double
    for (int64_t c = 0; c < cols; ++c) sum[c] += scale * row[c];
  }
  for (int64_t c = 0; c < cols; ++c) dst[c] = static_cast<float>(sum[c]);
}

}  // namespace sg::ref
