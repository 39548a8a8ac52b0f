#pragma once
// Row movement between token order [T, H] and the permuted (expert) order [rows, H] of a MoE layer,
// shared by kernels/moe_permute.cu and kernels/moe_combine.cu (include from .cu files only).
//   expand: permuted row r <- weight(slot) * tokens[slot / k] (slot = row_to_slot[r]; zeros when -1),
//           optionally with dots[slot] = <other[r], tokens[slot / k]>   (permute fwd, combine bwd)
//   gather: token t <- sum_j weight(slot) * rows[slot_to_row[slot]] over slots t k + j, j = 0..k-1 in
//           order, skipping dropped slots (-1)                           (combine fwd, permute bwd)
// fp32 in registers, bf16 in memory; 16-byte vectors when H % 8 == 0 and every row pointer is aligned.
#include <algorithm>
#include <initializer_list>

#include "core/error.h"
#include "core/strings.h"
#include "cuda/check.h"
#include "kernels/common.cuh"

namespace sg::kernels::moe_rows {

inline constexpr int kMaxThreads = 256;

struct ExpandArgs {
  bf16* dst = nullptr;                   // [rows, H]
  const bf16* tokens = nullptr;          // [T, H]
  const int32_t* row_to_slot = nullptr;  // [rows]
  const float* weights = nullptr;        // [T * k] per slot, or null (weight 1)
  // Dot mode (other != null): dots[slot] = <other[r], tokens[slot / k]>, and the extra blocks past
  // `rows` write dots[slot] = 0 for every slot whose slot_to_row is -1 (no row of its own).
  const bf16* other = nullptr;           // [rows, H]
  float* dots = nullptr;                 // [T * k]
  const int32_t* slot_to_row = nullptr;  // [T * k]
  int64_t slots = 0;
  int64_t rows = 0, k = 1, H = 0;
};

// Rows per block of expand and slots per batch of gather: their loads are issued together, so each thread
// keeps several 16-byte reads in flight (one row per block leaves the copies latency-bound).
inline constexpr int kExpandRows = 4;
inline constexpr int kGatherSlots = 2;

// Block b < row_blocks: rows b * kExpandRows + q. Per row the same arithmetic (and, in dot mode, the same
// per-thread partial sums and block reduction) as one block per row: the outputs do not depend on
// kExpandRows.
template <int VEC>
__global__ void expand_rows_kernel(ExpandArgs a) {
  __shared__ float reduce_scratch[32];
  constexpr int32_t kNoRow = -2;  // past the last row (row_to_slot holds -1 or a slot)
  const int64_t row_blocks = (a.rows + kExpandRows - 1) / kExpandRows;
  if (blockIdx.x >= row_blocks) {  // dot mode: zero the dots of dropped slots
    const int64_t s = (blockIdx.x - row_blocks) * blockDim.x + threadIdx.x;
    if (s < a.slots && a.slot_to_row[s] < 0) a.dots[s] = 0.0f;
    return;
  }
  const int64_t r0 = static_cast<int64_t>(blockIdx.x) * kExpandRows;
  int32_t slot[kExpandRows];
  float w[kExpandRows];
#pragma unroll
  for (int q = 0; q < kExpandRows; ++q) slot[q] = r0 + q < a.rows ? a.row_to_slot[r0 + q] : kNoRow;
#pragma unroll
  for (int q = 0; q < kExpandRows; ++q) w[q] = (slot[q] >= 0 && a.weights) ? a.weights[slot[q]] : 1.0f;
  float dot[kExpandRows] = {};
  const int64_t chunks = a.H / VEC;
  for (int64_t c = threadIdx.x; c < chunks; c += blockDim.x) {
    float v[kExpandRows][VEC], o[kExpandRows][VEC];
#pragma unroll
    for (int q = 0; q < kExpandRows; ++q) {
      if (slot[q] < 0) continue;
      detail::load_bf16<VEC>(a.tokens + (slot[q] / a.k) * a.H + c * VEC, v[q]);
      if (a.other) detail::load_bf16<VEC>(a.other + (r0 + q) * a.H + c * VEC, o[q]);
    }
#pragma unroll
    for (int q = 0; q < kExpandRows; ++q) {
      if (slot[q] == kNoRow) continue;
      bf16* dst = a.dst + (r0 + q) * a.H + c * VEC;
      if (slot[q] < 0) {
        float zeros[VEC] = {};
        detail::store_bf16<VEC>(dst, zeros);
        continue;
      }
      if (a.other) {
#pragma unroll
        for (int i = 0; i < VEC; ++i) dot[q] += o[q][i] * v[q][i];
      }
#pragma unroll
      for (int i = 0; i < VEC; ++i) v[q][i] *= w[q];
      detail::store_bf16<VEC>(dst, v[q]);
    }
  }
  if (a.other) {
#pragma unroll
    for (int q = 0; q < kExpandRows; ++q) {
      if (slot[q] < 0) continue;  // the whole block takes this branch (slot is per row)
      const float sum = detail::block_reduce_sum(dot[q], reduce_scratch);
      if (threadIdx.x == 0) a.dots[slot[q]] = sum;
    }
  }
}

struct GatherArgs {
  bf16* dst = nullptr;                   // [T, H]
  const bf16* rows = nullptr;            // [rows, H]
  const int32_t* slot_to_row = nullptr;  // [T * k]
  const float* weights = nullptr;        // [T * k] per slot, or null (weight 1)
  int64_t T = 0, k = 1, H = 0;
};

// The slots of a token in batches of kGatherSlots: their rows are all requested before any is summed;
// the sum stays in slot order.
template <int VEC>
__global__ void gather_rows_kernel(GatherArgs a) {
  const int64_t t = blockIdx.x;
  const int64_t chunks = a.H / VEC;
  for (int64_t c = threadIdx.x; c < chunks; c += blockDim.x) {
    float acc[VEC] = {};
    for (int64_t j0 = 0; j0 < a.k; j0 += kGatherSlots) {
      int32_t row[kGatherSlots];
      float w[kGatherSlots], v[kGatherSlots][VEC];
#pragma unroll
      for (int jj = 0; jj < kGatherSlots; ++jj) row[jj] = j0 + jj < a.k ? a.slot_to_row[t * a.k + j0 + jj] : -1;
#pragma unroll
      for (int jj = 0; jj < kGatherSlots; ++jj) {
        if (row[jj] < 0) continue;
        w[jj] = a.weights ? a.weights[t * a.k + j0 + jj] : 1.0f;
        detail::load_bf16<VEC>(a.rows + row[jj] * a.H + c * VEC, v[jj]);
      }
#pragma unroll
      for (int jj = 0; jj < kGatherSlots; ++jj) {
        if (row[jj] < 0) continue;
#pragma unroll
        for (int i = 0; i < VEC; ++i) acc[i] += w[jj] * v[jj][i];
      }
    }
    detail::store_bf16<VEC>(a.dst + t * a.H + c * VEC, acc);
  }
}

// Vectorised when H % 8 == 0 and every base pointer is 16-byte aligned (rows are then aligned too).
inline bool use_vectors(int64_t H, std::initializer_list<const void*> pointers) {
  if (H % detail::kBf16PerVec != 0) return false;
  return std::all_of(pointers.begin(), pointers.end(), [](const void* q) { return !q || detail::is_aligned(q, 16); });
}

// Shape and pointer checks of both directions; op names the public launcher.
inline void check_args(const char* op, int64_t rows_or_tokens, int64_t k, int64_t H, bool pointers_set) {
  SG_CHECK(rows_or_tokens >= 0 && k >= 1 && H > 0, strprintf("%s: bad shape rows/tokens=%lld k=%lld H=%lld", op,
                                                             (long long)rows_or_tokens, (long long)k, (long long)H));
  SG_CHECK(pointers_set, strprintf("%s: null pointer in params", op));
}

inline void launch_expand(cudaStream_t stream, const ExpandArgs& a, const char* op) {
  check_args(op, a.rows, a.k, a.H, a.dst && a.tokens && a.row_to_slot && (!a.other || (a.dots && a.slot_to_row)));
  const bool vec = use_vectors(a.H, {a.dst, a.tokens, a.other});
  const int vec_width = vec ? detail::kBf16PerVec : 1;
  const int threads = detail::row_block_threads(a.H, vec_width, kMaxThreads);
  const int64_t extra = a.other ? detail::ceil_div(a.slots, threads) : 0;
  const int64_t blocks = detail::ceil_div(a.rows, kExpandRows) + extra;
  SG_CHECK(blocks < (int64_t{1} << 31), strprintf("%s: %lld rows exceed the grid limit", op, (long long)a.rows));
  if (blocks == 0) return;
  if (vec) {
    expand_rows_kernel<detail::kBf16PerVec><<<static_cast<unsigned>(blocks), threads, 0, stream>>>(a);
  } else {
    expand_rows_kernel<1><<<static_cast<unsigned>(blocks), threads, 0, stream>>>(a);
  }
  SG_CUDA_CHECK_LAUNCH("expand_rows_kernel");
}

inline void launch_gather(cudaStream_t stream, const GatherArgs& a, const char* op) {
  check_args(op, a.T, a.k, a.H, a.dst && a.rows && a.slot_to_row);
  SG_CHECK(a.T < (int64_t{1} << 31), strprintf("%s: %lld tokens exceed the grid limit", op, (long long)a.T));
  if (a.T == 0) return;
  const bool vec = use_vectors(a.H, {a.dst, a.rows});
  const int vec_width = vec ? detail::kBf16PerVec : 1;
  const int threads = detail::row_block_threads(a.H, vec_width, kMaxThreads);
  if (vec) {
    gather_rows_kernel<detail::kBf16PerVec><<<static_cast<unsigned>(a.T), threads, 0, stream>>>(a);
  } else {
    gather_rows_kernel<1><<<static_cast<unsigned>(a.T), threads, 0, stream>>>(a);
  }
  SG_CUDA_CHECK_LAUNCH("gather_rows_kernel");
}

}  // namespace sg::kernels::moe_rows
