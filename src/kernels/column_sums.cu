// Column-sum launcher and scratch planning (kernels: column_sums.cuh).
#include "kernels/column_sums.cuh"
#include "kernels/column_sums.h"
#include "kernels/cuda_launch.cuh"

namespace sg::kernels {

int64_t column_sums_num_partials(int64_t rows) {
  return colsums::num_partials(rows);
}

size_t column_sums_scratch_bytes(int64_t rows, int64_t cols) {
  return static_cast<size_t>(column_sums_num_partials(rows) * cols) * sizeof(float);
}

void column_sums(cudaStream_t stream, const ColumnSumsParams& p) {
  colsums::run_column_sums(detail::CudaLaunch{stream}, p);
}

}  // namespace sg::kernels
