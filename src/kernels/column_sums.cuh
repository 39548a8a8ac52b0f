#pragma once
// Kernel and launch sequence of column_sums (kernels/column_sums.h), written over a launch policy so the CPU
// emulator of the tests runs the same code as the launcher (detail::CudaLaunch).
#include "core/error.h"
#include "core/strings.h"
#include "kernels/column_sums.h"
#include "kernels/common.cuh"
#include "kernels/launch_checks.h"
#include "kernels/partial_sums.cuh"

namespace sg::kernels::colsums {
SG_EMULATED_NAMESPACE_BEGIN

// Block = 32 column lanes x 8 row slots (thread t: lane t % 32, slot t / 32); a lane holds VEC consecutive
// columns (8: one 16-byte load per row, a warp reads 512 contiguous bytes; 1: any shape or alignment).
// At most kMaxSlots slots: at most kMaxSlots / 8 partial rows.
inline constexpr int kLanes = 32, kSlotsPerBlock = 8, kThreads = kLanes * kSlotsPerBlock;
inline constexpr int64_t kMaxSlots = 1024;
// Rows loaded before they are added (more bytes in flight per thread; the order of the adds is unchanged).
inline constexpr int kUnroll = 4;

SG_HOST_DEVICE int64_t num_partials(int64_t rows) {
  return rows <= 0 ? 0 : detail::ceil_div(rows < kMaxSlots ? rows : kMaxSlots, kSlotsPerBlock);
}

// A row's values times its scale, each product rounded to fp32 on its own (mul_rn: never fused into the sum).
template <int VEC>
SG_DEVICE void scale_values(float scale, float (&v)[VEC]) {
  SG_UNROLL
  for (int k = 0; k < VEC; ++k) v[k] = detail::mul_rn(scale, v[k]);
}

// Slot s = block_y * 8 + t / 32 sums rows s, s + num_slots, ... of its columns in increasing order, the same
// order for either VEC (so the bits do not depend on the path); the block's 8 slots are then added in slot
// order into partial row block_y. SCALED: the values are scaled by their row's factor first; an unscaled launch
// runs the code without the multiply (so its bits are those of a scale of 1).
template <int VEC, bool SCALED>
SG_KERNEL(kThreads)
column_sums_kernel(ColumnSumsParams p) {
  constexpr int kBlockCols = kLanes * VEC;
  float* slot_sums = reinterpret_cast<float*>(detail::dynamic_smem());  // [kSlotsPerBlock][kBlockCols]
  const int t = detail::thread_index();
  const int lane = t % kLanes, slot_in_block = t / kLanes;
  const int64_t block_col = static_cast<int64_t>(detail::block_index_x()) * kBlockCols;
  const int64_t c0 = block_col + static_cast<int64_t>(lane) * VEC;  // VEC == 8: cols % 8 == 0, all in or all out
  const int64_t num_slots = num_partials(p.rows) * kSlotsPerBlock;
  float acc[VEC];
  SG_UNROLL
  for (int k = 0; k < VEC; ++k) acc[k] = 0.0f;
  if (c0 < p.cols) {
    const bf16* src = p.in + c0;
    int64_t r = static_cast<int64_t>(detail::block_index_y()) * kSlotsPerBlock + slot_in_block;
    for (; r + (kUnroll - 1) * num_slots < p.rows; r += kUnroll * num_slots) {
      float v[kUnroll][VEC];
      SG_UNROLL
      for (int u = 0; u < kUnroll; ++u) detail::load_bf16<VEC>(src + (r + u * num_slots) * p.row_stride, v[u]);
      if constexpr (SCALED) {
        SG_UNROLL
        for (int u = 0; u < kUnroll; ++u) scale_values<VEC>(p.row_scale[r + u * num_slots], v[u]);
      }
      SG_UNROLL
      for (int u = 0; u < kUnroll; ++u) {
        SG_UNROLL
        for (int k = 0; k < VEC; ++k) acc[k] += v[u][k];
      }
    }
    for (; r < p.rows; r += num_slots) {
      float v[VEC];
      detail::load_bf16<VEC>(src + r * p.row_stride, v);
      if constexpr (SCALED) scale_values<VEC>(p.row_scale[r], v);
      SG_UNROLL
      for (int k = 0; k < VEC; ++k) acc[k] += v[k];
    }
  }
  if constexpr (VEC == 8) {
    detail::store_f32<VEC>(slot_sums + slot_in_block * kBlockCols + lane * VEC, acc);
  } else {
    slot_sums[slot_in_block * kBlockCols + lane] = acc[0];
  }
  detail::block_sync();
  const int64_t col = block_col + t;  // thread t adds column t of the block's 8 slots (coalesced store)
  if (t >= kBlockCols || col >= p.cols) return;
  float total = 0.0f;
  SG_UNROLL
  for (int y = 0; y < kSlotsPerBlock; ++y) total += slot_sums[y * kBlockCols + t];
  p.scratch[static_cast<int64_t>(detail::block_index_y()) * p.cols + col] = total;
}

// The 16-byte path applies: cols and the row stride multiples of 8, `in` 16-byte aligned.
inline bool vector_path(const ColumnSumsParams& p) {
  return detail::bf16_vector_path_ok(p.cols, {p.row_stride}, {p.in});
}

// The slot kernel on the 16-byte path where it applies, else the scalar one.
template <bool SCALED, class Launch>
void launch_slots(const Launch& launch, const ColumnSumsParams& p, int64_t partials) {
  if (vector_path(p)) {
    constexpr int kVec = 8;
    const dim3 grid(static_cast<unsigned>(detail::ceil_div(p.cols, kLanes * kVec)), static_cast<unsigned>(partials));
    launch("column_sums_kernel", column_sums_kernel<kVec, SCALED>, grid, kThreads,
           sizeof(float) * kSlotsPerBlock * kLanes * kVec, p);
  } else {
    const dim3 grid(static_cast<unsigned>(detail::ceil_div(p.cols, kLanes)), static_cast<unsigned>(partials));
    launch("column_sums_kernel", column_sums_kernel<1, SCALED>, grid, kThreads, sizeof(float) * kSlotsPerBlock * kLanes,
           p);
  }
}

template <class Launch>
void run_column_sums(const Launch& launch, ColumnSumsParams p) {
  const char* op = "column_sums";
  SG_CHECK(p.rows >= 0 && p.cols > 0, strprintf("%s: bad shape rows=%lld cols=%lld (need rows >= 0, cols > 0)", op,
                                                static_cast<long long>(p.rows), static_cast<long long>(p.cols)));
  p.row_stride = detail::resolve_row_stride(op, "row_stride", p.row_stride, p.cols);
  SG_CHECK(p.dst.data != nullptr, strprintf("%s: dst.data is null", op));
  if (p.rows == 0) return;
  SG_CHECK(p.in != nullptr, strprintf("%s: in is null", op));
  const int64_t partials = num_partials(p.rows);
  detail::check_scratch(
      op, p.scratch, p.scratch_bytes, static_cast<size_t>(partials * p.cols) * sizeof(float),
      strprintf("rows=%lld cols=%lld", static_cast<long long>(p.rows), static_cast<long long>(p.cols)),
      "column_sums_scratch_bytes(rows, cols)");
  if (p.row_scale != nullptr) {
    launch_slots<true>(launch, p, partials);
  } else {
    launch_slots<false>(launch, p, partials);
  }
  partial_sums::run_column_sums(launch, p.scratch, partials, {{p.dst, p.cols}});
}

SG_EMULATED_NAMESPACE_END
}  // namespace sg::kernels::colsums
