#include "kernels/partial_sums.h"

#include "core/error.h"
#include "core/strings.h"
#include "cuda/check.h"
#include "kernels/common.cuh"

namespace sg::kernels {
namespace {

struct Segments {
  float* dst[kMaxColumnSumSegments];
  int64_t end[kMaxColumnSumSegments];  // running column end of each segment
  int count;
};

// Block = 32 columns x 8 thread rows. Thread row y sums rows y, y+8, y+16, ... of its column; thread row 0
// then adds the 8 subtotals in order: a fixed order for a given `rows`.
constexpr int kCols = 32, kRows = 8;
__global__ void __launch_bounds__(kCols * kRows)
    column_sums_kernel(const float* partials, int64_t rows, int64_t ld, Segments seg) {
  __shared__ float subtotal[kRows][kCols + 1];
  const int64_t col = static_cast<int64_t>(blockIdx.x) * kCols + threadIdx.x;
  float s = 0.0f;
  if (col < ld) {
    for (int64_t r = threadIdx.y; r < rows; r += kRows) s += partials[r * ld + col];
  }
  subtotal[threadIdx.y][threadIdx.x] = s;
  __syncthreads();
  if (threadIdx.y != 0 || col >= ld) return;
  float total = 0.0f;
#pragma unroll
  for (int y = 0; y < kRows; ++y) total += subtotal[y][threadIdx.x];
  int k = 0;
  while (col >= seg.end[k]) ++k;
  const int64_t begin = k == 0 ? 0 : seg.end[k - 1];
  seg.dst[k][col - begin] += total;
}

}  // namespace

void add_partial_column_sums(cudaStream_t stream, const float* partials, int64_t rows,
                             std::initializer_list<ColumnSumSegment> segments) {
  SG_CHECK(segments.size() >= 1 && segments.size() <= static_cast<size_t>(kMaxColumnSumSegments),
           strprintf("add_partial_column_sums: %zu segments (1 to %d)", segments.size(), kMaxColumnSumSegments));
  SG_CHECK(rows >= 0, strprintf("add_partial_column_sums: rows = %lld < 0", static_cast<long long>(rows)));
  Segments seg{};
  int64_t ld = 0;
  for (const ColumnSumSegment& s : segments) {
    SG_CHECK(s.dst != nullptr && s.cols > 0,
             strprintf("add_partial_column_sums: segment %d has dst %p, cols %lld (need non-null, cols > 0)",
                       seg.count, static_cast<void*>(s.dst), static_cast<long long>(s.cols)));
    ld += s.cols;
    seg.dst[seg.count] = s.dst;
    seg.end[seg.count] = ld;
    ++seg.count;
  }
  if (rows == 0) return;
  SG_CHECK(partials != nullptr, "add_partial_column_sums: null partials");
  const dim3 block(kCols, kRows);
  const auto grid = static_cast<unsigned>(detail::ceil_div(ld, kCols));
  column_sums_kernel<<<grid, block, 0, stream>>>(partials, rows, ld, seg);
  SG_CUDA_CHECK_LAUNCH("column_sums_kernel");
}

}  // namespace sg::kernels
