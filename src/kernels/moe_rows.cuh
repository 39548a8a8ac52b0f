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

template <int VEC>
__global__ void expand_rows_kernel(ExpandArgs a) {
  __shared__ float reduce_scratch[32];
  const int64_t r = blockIdx.x;
  if (r >= a.rows) {  // dot mode: zero the dots of dropped slots
    const int64_t s = (r - a.rows) * blockDim.x + threadIdx.x;
    if (s < a.slots && a.slot_to_row[s] < 0) a.dots[s] = 0.0f;
    return;
  }
  const int32_t slot = a.row_to_slot[r];
  bf16* dst = a.dst + r * a.H;
  const int64_t chunks = a.H / VEC;
  if (slot < 0) {
    float zeros[VEC] = {};
    for (int64_t c = threadIdx.x; c < chunks; c += blockDim.x) detail::store_bf16<VEC>(dst + c * VEC, zeros);
    return;
  }
  const float w = a.weights ? a.weights[slot] : 1.0f;
  const bf16* src = a.tokens + (slot / a.k) * a.H;
  float dot = 0.0f;
  for (int64_t c = threadIdx.x; c < chunks; c += blockDim.x) {
    float v[VEC];
    detail::load_bf16<VEC>(src + c * VEC, v);
    if (a.other) {
      float o[VEC];
      detail::load_bf16<VEC>(a.other + r * a.H + c * VEC, o);
#pragma unroll
      for (int i = 0; i < VEC; ++i) dot += o[i] * v[i];
    }
#pragma unroll
    for (int i = 0; i < VEC; ++i) v[i] *= w;
    detail::store_bf16<VEC>(dst + c * VEC, v);
  }
  if (a.other) {  // the whole block takes this branch (slot is per block)
    dot = detail::block_reduce_sum(dot, reduce_scratch);
    if (threadIdx.x == 0) a.dots[slot] = dot;
  }
}

struct GatherArgs {
  bf16* dst = nullptr;                   // [T, H]
  const bf16* rows = nullptr;            // [rows, H]
  const int32_t* slot_to_row = nullptr;  // [T * k]
  const float* weights = nullptr;        // [T * k] per slot, or null (weight 1)
  int64_t T = 0, k = 1, H = 0;
};

template <int VEC>
__global__ void gather_rows_kernel(GatherArgs a) {
  const int64_t t = blockIdx.x;
  const int64_t chunks = a.H / VEC;
  for (int64_t c = threadIdx.x; c < chunks; c += blockDim.x) {
    float acc[VEC] = {};
    for (int64_t j = 0; j < a.k; ++j) {
      const int64_t slot = t * a.k + j;
      const int32_t row = a.slot_to_row[slot];
      if (row < 0) continue;
      const float w = a.weights ? a.weights[slot] : 1.0f;
      float v[VEC];
      detail::load_bf16<VEC>(a.rows + row * a.H + c * VEC, v);
#pragma unroll
      for (int i = 0; i < VEC; ++i) acc[i] += w * v[i];
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
  const int64_t blocks = a.rows + extra;
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
