#include "kernels/partial_sums.h"

#include "kernels/cuda_launch.cuh"
#include "kernels/partial_sums.cuh"

namespace sg::kernels {

void add_partial_column_sums(cudaStream_t stream, const float* partials, int64_t rows,
                             std::initializer_list<ColumnSumSegment> segments) {
  partial_sums::run_column_sums(detail::CudaLaunch{stream}, partials, rows, segments);
}

void add_partial_column_sums_batched(cudaStream_t stream, const float* partials, int64_t rows, int64_t cols,
                                     int64_t count, FloatBuffer dst_base, const int64_t* dst_offsets) {
  partial_sums::run_column_sums_batched(detail::CudaLaunch{stream}, partials, rows, cols, count, dst_base,
                                        dst_offsets);
}

}  // namespace sg::kernels
