#include "reference/partial_sums.h"

namespace sg::ref {

void add_partial_column_sums(float* dst, const float* partials, int64_t rows, int64_t ld, int64_t col, int64_t cols) {
  for (int64_t j = 0; j < cols; ++j) {
    double sum = dst[j];
    for (int64_t r = 0; r < rows; ++r) sum += partials[r * ld + col + j];
    dst[j] = static_cast<float>(sum);
  }
}

}  // namespace sg::ref
