#pragma once
// Kernels and launch sequences of the grouped linears' per-group biases (kernels/grouped_linear_bias.h), written over
// a launch policy so the CPU emulator of the tests runs the same code as the launchers (detail::CudaLaunch).
#include <cstdint>

#include "core/error.h"
#include "core/strings.h"
#include "kernels/common.cuh"
#include "kernels/grouped_linear_bias.h"
#include "kernels/launch_checks.h"

namespace sg::kernels::grouped_bias {
SG_EMULATED_NAMESPACE_BEGIN

// A forward block: its threads walk the chunk's rows x VEC-column pieces. Backward chunk block = 32 column lanes x 8
// row slots (thread t: lane t % 32, slot t / 32); a lane holds VEC consecutive columns. The reduce block: one thread
// per column.
inline constexpr int kForwardThreads = 256;
inline constexpr int kLanes = 32, kSlots = 8, kChunkThreads = kLanes * kSlots, kReduceThreads = 256;
inline constexpr int64_t kChunkRows = kGroupedBiasChunkRows;

struct Segment {
  int64_t first, rows;  // rows 0: the group is empty
};

// Group g's rows as the grouped GEMM reads them (kernels/grouped_gemm_segment.cuh): [offsets[g], offsets[g] +
// counts[g]) clamped into [0, max_rows), so a malformed count can never reach outside the buffers.
SG_DEVICE Segment segment(const int32_t* counts, const int32_t* offsets, int g, int64_t max_rows) {
  int64_t first = offsets[g], rows = counts[g];
  if (rows < 0 || first < 0 || first >= max_rows) rows = 0;
  if (rows > max_rows - first) rows = max_rows - first;
  return {rows == 0 ? 0 : first, rows};
}

SG_HOST_DEVICE int64_t chunks_of(int64_t rows) {
  return detail::ceil_div(rows, kChunkRows);
}

SG_HOST_DEVICE int64_t num_partials(int64_t max_rows, int num_groups) {
  // Each group's chunks cover its rows, at most one of them partial.
  return max_rows <= 0 ? 0 : chunks_of(max_rows) + num_groups;
}

// Chunk j of the groups' chunks in group order: group g's rows [first, end). g == num_groups: past the last chunk.
struct Chunk {
  int g;
  int64_t first, end;
};
template <class Params>
SG_DEVICE Chunk chunk_at(const Params& p, int64_t j) {
  int64_t before = 0;
  for (int g = 0; g < p.num_groups; ++g) {
    const Segment s = segment(p.counts, p.offsets, g, p.max_rows);
    const int64_t n = chunks_of(s.rows);
    if (j < before + n) {
      const int64_t first = s.first + (j - before) * kChunkRows;
      return {g, first, s.first + s.rows < first + kChunkRows ? s.first + s.rows : first + kChunkRows};
    }
    before += n;
  }
  return {p.num_groups, 0, 0};
}

// Block x = chunk j: its group's bias added to the chunk's rows (the chunks cover every segment; other rows are not
// touched). One group lookup per block of up to 256 rows, not per row.
template <int VEC>
SG_KERNEL(kForwardThreads)
forward_kernel(GroupedBiasForwardParams p) {
  const Chunk c = chunk_at(p, detail::block_index_x());
  if (c.g == p.num_groups) return;
  const bf16* bias = p.bias + static_cast<int64_t>(c.g) * p.cols;
  const int64_t pieces = p.cols / VEC;  // VEC == 8: cols % 8 == 0
  const int64_t n = (c.end - c.first) * pieces;
  for (int64_t i = detail::thread_index(); i < n; i += detail::block_threads()) {
    const int64_t col = (i % pieces) * VEC;
    bf16* y = p.y + (c.first + i / pieces) * p.cols + col;
    float v[VEC], b[VEC];
    detail::load_bf16<VEC>(y, v);
    detail::load_bf16<VEC>(bias + col, b);
    SG_UNROLL
    for (int k = 0; k < VEC; ++k) v[k] += b[k];
    detail::store_bf16<VEC>(y, v);
  }
}

// Block x = chunk j, y = a block of columns. Slot s sums rows s, s + 8, ... of the chunk in order; the 8 slots are
// added in slot order into partial row j. A block past the last chunk writes nothing.
template <int VEC>
SG_KERNEL(kChunkThreads)
chunk_sums_kernel(GroupedBiasBackwardParams p) {
  constexpr int kBlockCols = kLanes * VEC;
  float* slot_sums = reinterpret_cast<float*>(detail::dynamic_smem());  // [kSlots][kBlockCols]
  const int64_t j = detail::block_index_x();
  const Chunk c = chunk_at(p, j);
  if (c.g == p.num_groups) return;
  const int t = detail::thread_index();
  const int lane = t % kLanes, slot = t / kLanes;
  const int64_t block_col = static_cast<int64_t>(detail::block_index_y()) * kBlockCols;
  const int64_t c0 = block_col + static_cast<int64_t>(lane) * VEC;  // VEC == 8: cols % 8 == 0, all in or all out
  float acc[VEC];
  SG_UNROLL
  for (int k = 0; k < VEC; ++k) acc[k] = 0.0f;
  if (c0 < p.cols) {
    for (int64_t r = c.first + slot; r < c.end; r += kSlots) {
      float v[VEC];
      detail::load_bf16<VEC>(p.dy + r * p.cols + c0, v);
      SG_UNROLL
      for (int k = 0; k < VEC; ++k) acc[k] += v[k];
    }
  }
  SG_UNROLL
  for (int k = 0; k < VEC; ++k) slot_sums[slot * kBlockCols + lane * VEC + k] = acc[k];
  detail::block_sync();
  const int64_t col = block_col + t;  // thread t adds column t of the block's slots (coalesced store)
  if (t >= kBlockCols || col >= p.cols) return;
  float total = 0.0f;
  SG_UNROLL
  for (int y = 0; y < kSlots; ++y) total += slot_sums[y * kBlockCols + t];
  p.scratch[j * p.cols + col] = total;
}

// Block x = group g, y = a block of columns, one thread per column: group g's partial rows added in order into
// dst[g] (a group without chunks adds nothing).
SG_KERNEL(kReduceThreads)
reduce_kernel(GroupedBiasBackwardParams p) {
  const int g = detail::block_index_x();
  const int64_t col = static_cast<int64_t>(detail::block_index_y()) * kReduceThreads + detail::thread_index();
  int64_t before = 0;
  for (int e = 0; e < g; ++e) before += chunks_of(segment(p.counts, p.offsets, e, p.max_rows).rows);
  const int64_t n = chunks_of(segment(p.counts, p.offsets, g, p.max_rows).rows);
  if (n == 0 || col >= p.cols) return;
  float total = 0.0f;
  for (int64_t j = before; j < before + n; ++j) total += p.scratch[j * p.cols + col];
  detail::add_into(p.dst, static_cast<int64_t>(g) * p.cols + col, total);
}

inline void check_groups(const char* op, int num_groups, int64_t max_rows, int64_t cols, const void* counts,
                         const void* offsets) {
  SG_CHECK(num_groups >= 1 && max_rows >= 0 && cols >= 1,
           strprintf("%s: bad shape num_groups=%d max_rows=%lld cols=%lld (need num_groups >= 1, max_rows >= 0, "
                     "cols >= 1)",
                     op, num_groups, static_cast<long long>(max_rows), static_cast<long long>(cols)));
  SG_CHECK(max_rows == 0 || (counts != nullptr && offsets != nullptr), strprintf("%s: counts or offsets is null", op));
}

template <class Launch>
void run_forward(const Launch& launch, const GroupedBiasForwardParams& p) {
  const char* op = "grouped_bias_forward";
  check_groups(op, p.num_groups, p.max_rows, p.cols, p.counts, p.offsets);
  if (p.max_rows == 0) return;
  SG_CHECK(p.y != nullptr && p.bias != nullptr, strprintf("%s: y or bias is null", op));
  const dim3 grid(static_cast<unsigned>(num_partials(p.max_rows, p.num_groups)));
  if (detail::bf16_vector_path_ok(p.cols, {}, {p.y, p.bias})) {
    launch("grouped_bias_forward_kernel", forward_kernel<8>, grid, kForwardThreads, 0, p);
  } else {
    launch("grouped_bias_forward_kernel", forward_kernel<1>, grid, kForwardThreads, 0, p);
  }
}

template <class Launch>
void run_backward(const Launch& launch, const GroupedBiasBackwardParams& p) {
  const char* op = "grouped_bias_backward";
  check_groups(op, p.num_groups, p.max_rows, p.cols, p.counts, p.offsets);
  SG_CHECK(p.dst.data != nullptr, strprintf("%s: dst.data is null", op));
  if (p.max_rows == 0) return;
  SG_CHECK(p.dy != nullptr, strprintf("%s: dy is null", op));
  const int64_t partials = num_partials(p.max_rows, p.num_groups);
  detail::check_scratch(op, p.scratch, p.scratch_bytes, static_cast<size_t>(partials * p.cols) * sizeof(float),
                        strprintf("max_rows=%lld num_groups=%d cols=%lld", static_cast<long long>(p.max_rows),
                                  p.num_groups, static_cast<long long>(p.cols)),
                        "grouped_bias_scratch_bytes(max_rows, num_groups, cols)");
  if (detail::bf16_vector_path_ok(p.cols, {}, {p.dy})) {
    constexpr int kVec = 8;
    const dim3 grid(static_cast<unsigned>(partials), static_cast<unsigned>(detail::ceil_div(p.cols, kLanes * kVec)));
    launch("grouped_bias_chunk_sums_kernel", chunk_sums_kernel<kVec>, grid, kChunkThreads,
           sizeof(float) * kSlots * kLanes * kVec, p);
  } else {
    const dim3 grid(static_cast<unsigned>(partials), static_cast<unsigned>(detail::ceil_div(p.cols, kLanes)));
    launch("grouped_bias_chunk_sums_kernel", chunk_sums_kernel<1>, grid, kChunkThreads, sizeof(float) * kSlots * kLanes,
           p);
  }
  const dim3 grid(static_cast<unsigned>(p.num_groups), static_cast<unsigned>(detail::ceil_div(p.cols, kReduceThreads)));
  launch("grouped_bias_reduce_kernel", reduce_kernel, grid, kReduceThreads, 0, p);
}

SG_EMULATED_NAMESPACE_END
}  // namespace sg::kernels::grouped_bias
