#pragma once
// Kernels and launch sequences of KV-cache attention (kernels/decode_attention.h), written over a launch
// policy so the CPU emulator of the tests runs the same code as the launchers (detail::CudaLaunch).
//
// A decoding step has few (row, query head) pairs: one block each would leave most of the GPU idle while
// each block walks the whole cache. So the keys are split (flash-decoding): split_plan() gives each pair
// enough blocks to fill about kDecodeAttentionTargetBlocks, each block attends over its own range of keys and
// writes its running max, sum and unnormalised output (fp32) to the workspace, and a second kernel merges the
// splits in split order. The plan depends only on the shape (never on the device or the step), so a captured
// step and an eager one compute the same values, bit for bit. A prefill of more than a few rows has enough
// pairs for one split, whose block writes the bf16 output directly.
#include <cmath>
#include <cstdint>
#include <initializer_list>

#include "core/error.h"
#include "core/strings.h"
#include "kernels/common.cuh"
#include "kernels/decode_attention.h"

namespace sg::kernels::decode_attention {
SG_EMULATED_NAMESPACE_BEGIN

inline constexpr int kThreads = 128;
inline constexpr int kWarps = kThreads / 32;
inline constexpr int kKeyChunk = 1024;  // scores held in shared memory per pass over a split's keys
inline constexpr int kMaxPerLane = static_cast<int>(kDecodeAttentionMaxHeadDim / 32);  // head_dim values per lane
inline constexpr int kValueKeysInFlight = 4;  // keys a warp loads before accumulating them (loads in flight)
inline constexpr int64_t kMaxAppendBlocks = 1 << 16;
inline constexpr int64_t kSplitKeyMultiple = 32;

// `#pragma unroll N` for nvcc; nothing for the host compiler of the emulator (which does not know the pragma).
#if defined(SG_SIMT_EMULATION)
#define SG_DECODE_UNROLL_BY(n)
#else
#define SG_DECODE_PRAGMA(text) _Pragma(#text)
#define SG_DECODE_UNROLL_BY(n) SG_DECODE_PRAGMA(unroll n)
#endif

// The shape fields the kernels need, by value (ref::DecodeAttentionShape's helpers are host-only).
struct DeviceShape {
  int64_t T, rows_per_slot, first_slot, capacity, heads, kv_heads, head_dim;
};
inline DeviceShape device_shape(const ref::DecodeAttentionShape& s) {
  return {s.T, s.rows_per_slot, s.first_slot, s.capacity, s.heads, s.kv_heads, s.head_dim};
}

// How the keys of a (row, head) pair are split across blocks.
struct SplitPlan {
  int64_t splits = 1;      // blocks per pair
  int64_t split_keys = 0;  // keys per block (a multiple of 32); the last block's range may end past the cache
};

// At least kDecodeAttentionMinSplitKeys keys per block; as many splits as bring T x heads x splits to about
// kDecodeAttentionTargetBlocks. Then T x heads x splits < 2 x kDecodeAttentionTargetBlocks whenever
// splits > 1, which bounds the workspace (kDecodeAttentionWorkspaceBytes).
inline SplitPlan split_plan(const ref::DecodeAttentionShape& s) {
  const int64_t pairs = s.T * s.heads;
  if (pairs == 0 || s.capacity == 0) return {1, s.capacity};
  int64_t splits = detail::ceil_div(kDecodeAttentionTargetBlocks, pairs);
  const int64_t most = detail::ceil_div(s.capacity, kDecodeAttentionMinSplitKeys);
  splits = splits < most ? splits : most;
  if (splits <= 1) return {1, s.capacity};
  const int64_t keys = detail::round_up(detail::ceil_div(s.capacity, splits), kSplitKeyMultiple);
  return {detail::ceil_div(s.capacity, keys), keys};  // rounding up the keys may leave fewer splits
}

// fp32 values in the workspace: per (row, head, split) its max, its sum, and head_dim output values.
inline int64_t workspace_floats(const ref::DecodeAttentionShape& s, const SplitPlan& plan) {
  return plan.splits > 1 ? s.T * s.heads * plan.splits * (2 + s.head_dim) : 0;
}

struct AttentionArgs {
  bf16* out;
  const bf16* qkv;
  const bf16* k_cache;
  const bf16* v_cache;
  const int32_t* positions;
  float* workspace;  // null when splits == 1
  DeviceShape s;
  int64_t splits, split_keys;
  float scale;
};

SG_HOST_DEVICE int64_t cache_offset(const DeviceShape& s, int64_t slot, int64_t g, int64_t pos) {
  return ((slot * s.kv_heads + g) * s.capacity + pos) * s.head_dim;
}

SG_HOST_DEVICE bool position_valid(int32_t pos, const DeviceShape& s) {
  return pos >= 0 && pos < s.capacity;
}

// Where a (row, head, split)'s partial result lives: max, sum, then head_dim values.
SG_HOST_DEVICE float* partial_at(const AttentionArgs& a, int64_t t, int64_t h, int64_t split) {
  return a.workspace + ((t * a.s.heads + h) * a.splits + split) * (2 + a.s.head_dim);
}

struct AppendArgs {
  bf16* k_cache;
  bf16* v_cache;
  const bf16* qkv;
  const int32_t* positions;
  DeviceShape s;
};

SG_HOST_DEVICE int64_t append_blocks(const DeviceShape& s) {
  const int64_t blocks = detail::ceil_div(s.T * s.kv_heads * s.head_dim, 256);
  return blocks < 1 ? 1 : (blocks > kMaxAppendBlocks ? kMaxAppendBlocks : blocks);
}

// One thread per (row, kv head, element): k and v of the row into the cache; grid-stride.
SG_KERNEL(256) kv_cache_append_kernel(AppendArgs a) {
  const DeviceShape& s = a.s;
  const int64_t d = s.head_dim, width = (s.heads + 2 * s.kv_heads) * d;
  const int64_t total = s.T * s.kv_heads * d;
  const int64_t stride = append_blocks(s) * 256;
  for (int64_t idx = static_cast<int64_t>(detail::block_index_x()) * 256 + detail::thread_index(); idx < total;
       idx += stride) {
    const int64_t e = idx % d;
    const int64_t g = (idx / d) % s.kv_heads;
    const int64_t t = idx / (d * s.kv_heads);
    const int32_t pos = a.positions[t];
    if (!position_valid(pos, s)) continue;
    const int64_t at = cache_offset(s, s.first_slot + t / s.rows_per_slot, g, pos) + e;
    a.k_cache[at] = a.qkv[t * width + (s.heads + g) * d + e];
    a.v_cache[at] = a.qkv[t * width + (s.heads + s.kv_heads + g) * d + e];
  }
}

// Shared memory of the split kernel: q (head_dim), one chunk's scores, the warps' output sums, reduction scratch.
inline size_t split_smem_bytes(int64_t head_dim) {
  return static_cast<size_t>(head_dim + kKeyChunk + kWarps * head_dim + 32) * sizeof(float);
}

// One block per (row, query head, split): an online softmax over the split's keys in chunks of kKeyChunk (one
// thread per key for the scores; for the values one warp per key residue, lanes over head_dim, kValueKeysInFlight
// keys loaded ahead), the warps' sums added in a fixed order.
SG_KERNEL(kThreads) attention_split_kernel(AttentionArgs a) {
  const DeviceShape& s = a.s;
  const int64_t t = detail::block_index_x(), h = detail::block_index_y(), split = detail::block_index_z();
  const int64_t d = s.head_dim, width = (s.heads + 2 * s.kv_heads) * d;
  const int tid = detail::thread_index();
  const int lane = static_cast<int>(detail::lane_id()), warp = static_cast<int>(detail::warp_id());
  const int32_t pos = a.positions[t];
  if (!position_valid(pos, s)) {  // a caller bug: NaN in the logits (the merge writes it when there are splits)
    if (a.splits == 1) {
      for (int64_t e = tid; e < d; e += kThreads) a.out[(t * s.heads + h) * d + e] = __float2bfloat16_rn(nanf(""));
    }
    return;
  }
  float* q = reinterpret_cast<float*>(detail::dynamic_smem());
  float* scores = q + d;
  float* partial = scores + kKeyChunk;  // [kWarps][d]
  float* scratch = partial + kWarps * d;
  const int64_t g = h / (s.heads / s.kv_heads);
  const int64_t slot = s.first_slot + t / s.rows_per_slot;
  const int64_t n = static_cast<int64_t>(pos) + 1;
  const int64_t first = split * a.split_keys;
  const int64_t last = first + a.split_keys < n ? first + a.split_keys : n;  // keys [first, last)
  const bf16* keys = a.k_cache + cache_offset(s, slot, g, 0);
  const bf16* values = a.v_cache + cache_offset(s, slot, g, 0);
  for (int64_t e = tid; e < d; e += kThreads) q[e] = __bfloat162float(a.qkv[t * width + h * d + e]);
  detail::block_sync();

  const bool vec = d % detail::kBf16PerVec == 0;
  float acc[kMaxPerLane];
  SG_UNROLL
  for (int k = 0; k < kMaxPerLane; ++k) acc[k] = 0.0f;
  float running_max = -INFINITY, running_sum = 0.0f;
  for (int64_t c0 = first; c0 < last; c0 += kKeyChunk) {
    const int chunk = last - c0 < kKeyChunk ? static_cast<int>(last - c0) : kKeyChunk;
    float local_max = -INFINITY;
    for (int j = tid; j < chunk; j += kThreads) {
      const bf16* k = keys + (c0 + j) * d;
      float dot = 0.0f;
      if (vec) {
        SG_DECODE_UNROLL_BY(4)
        for (int64_t e = 0; e < d; e += detail::kBf16PerVec) {
          float kv[detail::kBf16PerVec];
          detail::load_bf16<detail::kBf16PerVec>(k + e, kv);
          SG_UNROLL
          for (int x = 0; x < detail::kBf16PerVec; ++x) dot = fmaf(q[e + x], kv[x], dot);
        }
      } else {
        for (int64_t e = 0; e < d; ++e) dot = fmaf(q[e], __bfloat162float(k[e]), dot);
      }
      scores[j] = dot * a.scale;
      local_max = fmaxf(local_max, scores[j]);
    }
    const float new_max = fmaxf(running_max, detail::block_reduce_max(local_max, scratch));
    const float rescale = expf(running_max - new_max);  // 0 for the first chunk (exp(-inf))
    detail::block_sync();                               // every score of the chunk is written
    float local_sum = 0.0f;
    for (int j = tid; j < chunk; j += kThreads) {
      const float w = expf(scores[j] - new_max);
      scores[j] = w;
      local_sum += w;
    }
    const float chunk_sum = detail::block_reduce_sum(local_sum, scratch);  // synchronises: weights written
    running_sum = running_sum * rescale + chunk_sum;
    running_max = new_max;
    SG_UNROLL
    for (int k = 0; k < kMaxPerLane; ++k) acc[k] *= rescale;
    // Values: warp `warp` takes keys j = warp, warp + kWarps, ... in groups of kValueKeysInFlight (all loaded,
    // then accumulated in key order); lane takes elements lane + 32 k.
    for (int j0 = warp; j0 < chunk; j0 += kWarps * kValueKeysInFlight) {
      float v[kValueKeysInFlight][kMaxPerLane];
      SG_UNROLL
      for (int r = 0; r < kValueKeysInFlight; ++r) {
        const int j = j0 + r * kWarps;
        const bf16* row = values + (c0 + (j < chunk ? j : 0)) * d;
        SG_UNROLL
        for (int k = 0; k < kMaxPerLane; ++k) {
          const int64_t e = lane + 32 * k;
          v[r][k] = j < chunk && e < d ? __bfloat162float(row[e]) : 0.0f;
        }
      }
      SG_UNROLL
      for (int r = 0; r < kValueKeysInFlight; ++r) {
        const int j = j0 + r * kWarps;
        if (j >= chunk) break;
        const float w = scores[j];
        SG_UNROLL
        for (int k = 0; k < kMaxPerLane; ++k) acc[k] = fmaf(w, v[r][k], acc[k]);
      }
    }
    detail::block_sync();  // the next chunk overwrites scores
  }
  SG_UNROLL
  for (int k = 0; k < kMaxPerLane; ++k) {
    const int64_t e = lane + 32 * k;
    if (e < d) partial[warp * d + e] = acc[k];
  }
  detail::block_sync();
  // The warps' sums in warp order; normalised into the output with one split, else the split's partial result.
  // An empty split (its keys all past the row's position) writes max -inf, sum 0 and zeros: it weighs nothing.
  float* mine = a.splits == 1 ? nullptr : partial_at(a, t, h, split);
  if (mine != nullptr && tid == 0) {
    mine[0] = running_max;
    mine[1] = running_sum;
  }
  for (int64_t e = tid; e < d; e += kThreads) {
    float sum = partial[e];
    SG_UNROLL
    for (int w = 1; w < kWarps; ++w) sum += partial[w * d + e];
    if (mine != nullptr) {
      mine[2 + e] = sum;
    } else {
      a.out[(t * s.heads + h) * d + e] = __float2bfloat16_rn(sum * (1.0f / running_sum));
    }
  }
}

inline int merge_threads(int64_t head_dim) {
  return static_cast<int>(detail::round_up(head_dim, 32));
}

// One block per (row, query head), one thread per output element: the splits' results rescaled to the largest
// max and added in split order (split 0 always holds key 0, so the largest max is finite).
SG_KERNEL(kDecodeAttentionMaxHeadDim) attention_merge_kernel(AttentionArgs a) {
  const DeviceShape& s = a.s;
  const int64_t t = detail::block_index_x(), h = detail::block_index_y(), d = s.head_dim;
  const int64_t e = detail::thread_index();
  if (e >= d) return;
  bf16* o = a.out + (t * s.heads + h) * d + e;
  if (!position_valid(a.positions[t], s)) {
    *o = __float2bfloat16_rn(nanf(""));
    return;
  }
  float m = -INFINITY;
  for (int64_t split = 0; split < a.splits; ++split) m = fmaxf(m, partial_at(a, t, h, split)[0]);
  float sum = 0.0f, value = 0.0f;
  for (int64_t split = 0; split < a.splits; ++split) {
    const float* p = partial_at(a, t, h, split);
    const float w = expf(p[0] - m);  // 0 for an empty split
    sum = fmaf(p[1], w, sum);
    value = fmaf(p[2 + e], w, value);
  }
  *o = __float2bfloat16_rn(value / sum);
}

inline void check_params(const char* op, std::initializer_list<const void*> pointers, const int32_t* positions,
                         const ref::DecodeAttentionShape& s) {
  for (const void* pointer : pointers) {
    SG_CHECK(pointer != nullptr,
             strprintf("%s: null pointer (the output, qkv, both caches and positions are all required)", op));
  }
  SG_CHECK(positions != nullptr, strprintf("%s: null positions", op));
  ref::check_decode_attention_shape(s);
  SG_CHECK(s.head_dim <= kDecodeAttentionMaxHeadDim,
           strprintf("%s: head_dim = %lld exceeds the kernel's %lld", op, static_cast<long long>(s.head_dim),
                     static_cast<long long>(kDecodeAttentionMaxHeadDim)));
}

template <class Launch>
void run_append(const Launch& launch, const KvCacheAppendParams& p) {
  check_params("kv_cache_append", {p.k_cache, p.v_cache, p.qkv}, p.positions, p.shape);
  if (p.shape.T * p.shape.kv_heads * p.shape.head_dim == 0) return;
  const DeviceShape s = device_shape(p.shape);
  launch("kv_cache_append_kernel", kv_cache_append_kernel, dim3(static_cast<unsigned>(append_blocks(s))), 256, 0,
         AppendArgs{p.k_cache, p.v_cache, p.qkv, p.positions, s});
}

template <class Launch>
void run_attention(const Launch& launch, const DecodeAttentionParams& p) {
  const char* op = "decode_attention_forward";
  check_params(op, {p.out, p.qkv, p.k_cache, p.v_cache}, p.positions, p.shape);
  const ref::DecodeAttentionShape& s = p.shape;
  SG_CHECK(s.T <= INT32_MAX && s.heads <= 65535,
           strprintf("%s: T = %lld rows x %lld heads exceed the grid", op, static_cast<long long>(s.T),
                     static_cast<long long>(s.heads)));
  if (s.T == 0) return;
  const SplitPlan plan = split_plan(s);
  const auto need = static_cast<size_t>(workspace_floats(s, plan)) * sizeof(float);
  SG_CHECK(need <= kDecodeAttentionWorkspaceBytes,
           strprintf("%s: the split plan needs %zu bytes of workspace, over the %zu that callers reserve (a bug in "
                     "split_plan)",
                     op, need, kDecodeAttentionWorkspaceBytes));
  SG_CHECK(need == 0 || (p.workspace != nullptr && p.workspace_bytes >= need),
           strprintf("%s: %lld rows x %lld heads split %lld ways need a workspace of %zu bytes; got %zu at %p "
                     "(reserve kDecodeAttentionWorkspaceBytes)",
                     op, static_cast<long long>(s.T), static_cast<long long>(s.heads),
                     static_cast<long long>(plan.splits), need, p.workspace_bytes, p.workspace));
  const AttentionArgs args{.out = p.out,
                           .qkv = p.qkv,
                           .k_cache = p.k_cache,
                           .v_cache = p.v_cache,
                           .positions = p.positions,
                           .workspace = static_cast<float*>(p.workspace),
                           .s = device_shape(s),
                           .splits = plan.splits,
                           .split_keys = plan.split_keys,
                           .scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(s.head_dim)))};
  const dim3 pairs(static_cast<unsigned>(s.T), static_cast<unsigned>(s.heads));
  launch("attention_split_kernel", attention_split_kernel, dim3(pairs.x, pairs.y, static_cast<unsigned>(plan.splits)),
         kThreads, split_smem_bytes(s.head_dim), args);
  if (plan.splits > 1) {
    launch("attention_merge_kernel", attention_merge_kernel, pairs, merge_threads(s.head_dim), 0, args);
  }
}

SG_EMULATED_NAMESPACE_END
}  // namespace sg::kernels::decode_attention
