#pragma once
// Kernel and launch sequence of add_partial_column_sums (kernels/partial_sums.h), written over a launch
// policy so the CPU emulator of the tests runs the same code as the launcher (detail::CudaLaunch).
#include <initializer_list>

#include "core/error.h"
#include "core/strings.h"
#include "kernels/common.cuh"
#include "kernels/partial_sums.h"
#include "kernels/shape_limits.h"

namespace sg::kernels::partial_sums {
SG_EMULATED_NAMESPACE_BEGIN

struct ColumnSumArgs {
  const float* partials = nullptr;
  int64_t rows = 0, ld = 0;
  FloatBuffer dst[kMaxColumnSumSegments] = {};  // main gradients, fp32 or bf16
  int64_t end[kMaxColumnSumSegments] = {};      // running column end of each segment
  // Batched (add_partial_column_sums_batched): matrix blockIdx.y at partials + y * rows * ld, one
  // segment at dst_base + dst_offsets[y]; nullptr: one matrix and the segments above.
  FloatBuffer dst_base;
  const int64_t* dst_offsets = nullptr;
};

// Block = kCols columns x kRowThreads thread rows (thread t: column t % kCols, thread row t / kCols). Eight
// columns per block: a thread row reads one 32-byte sector per partial row, and the grid has ld / 8 blocks,
// enough to keep many reads in flight for a few-thousand-column matrix (the per-block column count, not
// the bytes, bounded the old 32-column layout). Thread row y sums rows y, y + 32, ... in order (four loads
// issued before their adds); the 4 thread rows of a warp then combine by a fixed butterfly, and warp 0
// adds the 8 warps' subtotals in warp order: a fixed order for a given `rows`.
// A template so that every .cu including this header may instantiate it (weak symbols, no clash).
inline constexpr int kCols = 8, kRowThreads = 32, kColumnSumThreads = kCols * kRowThreads;
inline constexpr int kColumnSumWarps = kColumnSumThreads / 32;
template <int kThreads = kColumnSumThreads>
SG_KERNEL(kThreads) column_sums_kernel(ColumnSumArgs a) {
  static_assert(kCols == 8 && kThreads == kColumnSumThreads, "the butterfly below pairs lanes 8 and 16 apart");
  float* warp_sums = reinterpret_cast<float*>(detail::dynamic_smem());  // [kColumnSumWarps][kCols]
  const int t = detail::thread_index();
  const int tx = t % kCols, ty = t / kCols;
  const int64_t col = static_cast<int64_t>(detail::block_index_x()) * kCols + tx;
  const int64_t matrix = detail::block_index_y();
  float s = 0.0f;
  if (col < a.ld) {
    const float* p = a.partials + matrix * a.rows * a.ld + col;
    int64_t r = ty;
    for (; r + 3 * kRowThreads < a.rows; r += 4 * kRowThreads) {
      const float v0 = p[r * a.ld], v1 = p[(r + kRowThreads) * a.ld];
      const float v2 = p[(r + 2 * kRowThreads) * a.ld], v3 = p[(r + 3 * kRowThreads) * a.ld];
      s += v0;
      s += v1;
      s += v2;
      s += v3;
    }
    for (; r < a.rows; r += kRowThreads) s += p[r * a.ld];
  }
  // Lane l holds column l % 8 of thread row 4 * warp + l / 8: add the lanes 8 and 16 apart (every lane
  // takes part, columns past ld with s = 0).
  s += detail::shfl_xor(s, 8);
  s += detail::shfl_xor(s, 16);
  const int lane = static_cast<int>(detail::lane_id()), warp = static_cast<int>(detail::warp_id());
  if (lane < kCols) warp_sums[warp * kCols + lane] = s;
  detail::block_sync();
  if (t >= kCols || col >= a.ld) return;  // warp 0, lanes 0..7 (tx == t) finish
  float total = 0.0f;
SG_UNROLL
  for (int w = 0; w < kColumnSumWarps; ++w) total += warp_sums[w * kCols + tx];
  if (a.dst_offsets != nullptr) {
    detail::add_into(a.dst_base, a.dst_offsets[matrix] + col, total);
    return;
  }
  int k = 0;
  while (col >= a.end[k]) ++k;
  const int64_t begin = k == 0 ? 0 : a.end[k - 1];
  detail::add_into(a.dst[k], col - begin, total);
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
    SG_CHECK(s.dst.data != nullptr && s.cols > 0,
             strprintf("add_partial_column_sums: segment %d has dst %p, cols %lld (need non-null, cols > 0)", count,
                       s.dst.data, static_cast<long long>(s.cols)));
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
  launch("column_sums_kernel", column_sums_kernel<>, grid, kColumnSumThreads, sizeof(float) * kColumnSumWarps * kCols,
         a);
}

template <class Launch>
void run_column_sums_batched(const Launch& launch, const float* partials, int64_t rows, int64_t cols, int64_t count,
                             FloatBuffer dst_base, const int64_t* dst_offsets) {
  SG_CHECK(rows >= 0 && cols > 0 && count >= 0 && count <= kMaxBatchedColumnSums,
           strprintf("add_partial_column_sums_batched: rows = %lld, cols = %lld, count = %lld (need rows >= 0, "
                     "cols > 0, 0 <= count <= %lld)",
                     static_cast<long long>(rows), static_cast<long long>(cols), static_cast<long long>(count),
                     static_cast<long long>(kMaxBatchedColumnSums)));
  if (rows == 0 || count == 0) return;
  SG_CHECK(partials != nullptr && dst_base.data != nullptr && dst_offsets != nullptr,
           "add_partial_column_sums_batched: null partials, dst_base or dst_offsets");
  ColumnSumArgs a;
  a.partials = partials;
  a.rows = rows;
  a.ld = cols;
  a.dst_base = dst_base;
  a.dst_offsets = dst_offsets;
  const dim3 grid(static_cast<unsigned>(detail::ceil_div(cols, kCols)), static_cast<unsigned>(count));
  launch("column_sums_kernel", column_sums_kernel<>, grid, kColumnSumThreads, sizeof(float) * kColumnSumWarps * kCols,
         a);
}

SG_EMULATED_NAMESPACE_END
}  // namespace sg::kernels::partial_sums
