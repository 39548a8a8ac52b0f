#pragma once
// Kernel and launch sequence of add_partial_column_sums (kernels/partial_sums.h), written over a launch
// policy so the CPU emulator of the tests runs the same code as the launcher (detail::CudaLaunch).
#include <initializer_list>

#include "core/error.h"
#include "core/strings.h"
#include "kernels/common.cuh"
#include "kernels/partial_sums.h"

namespace sg::kernels::partial_sums {
SG_EMULATED_NAMESPACE_BEGIN

struct ColumnSumArgs {
  const float* partials = nullptr;
  int64_t rows = 0, ld = 0;
  float* dst[kMaxColumnSumSegments] = {};
  int64_t end[kMaxColumnSumSegments] = {};  // running column end of each segment
};

// Block = 32 columns x 8 thread rows (thread t: column t % 32, row t / 32). Thread row y sums rows y, y+8,
// y+16, ... of its column; thread row 0 then adds the 8 subtotals in order: a fixed order for a given `rows`.
// A template so that every .cu including this header may instantiate it (weak symbols, no clash).
inline constexpr int kCols = 32, kRows = 8;
template <int kThreads = kCols * kRows>
SG_KERNEL(kThreads) column_sums_kernel(ColumnSumArgs a) {
  float(*subtotal)[kCols + 1] = reinterpret_cast<float(*)[kCols + 1]>(detail::dynamic_smem());  // [kRows][kCols+1]
  const int tx = detail::thread_index() % kCols, ty = detail::thread_index() / kCols;
  const int64_t col = static_cast<int64_t>(detail::block_index_x()) * kCols + tx;
  float s = 0.0f;
  if (col < a.ld) {
    for (int64_t r = ty; r < a.rows; r += kRows) s += a.partials[r * a.ld + col];
  }
  subtotal[ty][tx] = s;
  detail::block_sync();
  if (ty != 0 || col >= a.ld) return;
  float total = 0.0f;
SG_UNROLL
  for (int y = 0; y < kRows; ++y) total += subtotal[y][tx];
  int k = 0;
  while (col >= a.end[k]) ++k;
  const int64_t begin = k == 0 ? 0 : a.end[k - 1];
  a.dst[k][col - begin] += total;
}

template <class Launch>
void run_column_sums(const Launch& launch, const float* partials, int64_t rows,
                     std::initializer_list<ColumnSumSegment> segments) {
  SG_CHECK(segments.size() >= 1 && segments.size() <= static_cast<size_t>(kMaxColumnSumSegments),
           strprintf("add_partial_column_sums: %zu segments (1 to %d)", segments.size(), kMaxColumnSumSegments));
  SG_CHECK(rows >= 0, strprintf("add_partial_column_sums: rows = %lld < 0", static_cast<long long>(rows)));
  ColumnSumArgs a;
  int count = 0;
  for (const ColumnSumSegment& s : segments) {
    SG_CHECK(s.dst != nullptr && s.cols > 0,
             strprintf("add_partial_column_sums: segment %d has dst %p, cols %lld (need non-null, cols > 0)", count,
                       static_cast<void*>(s.dst), static_cast<long long>(s.cols)));
    a.ld += s.cols;
    a.dst[count] = s.dst;
    a.end[count] = a.ld;
    ++count;
  }
  if (rows == 0) return;
  SG_CHECK(partials != nullptr, "add_partial_column_sums: null partials");
  a.partials = partials;
  a.rows = rows;
  const dim3 grid(static_cast<unsigned>(detail::ceil_div(a.ld, kCols)));
  launch("column_sums_kernel", column_sums_kernel<>, grid, kCols * kRows, sizeof(float) * kRows * (kCols + 1), a);
}

SG_EMULATED_NAMESPACE_END
}  // namespace sg::kernels::partial_sums
