#pragma once
// Kernels and launch sequences of KV-cache attention (kernels/decode_attention.h), written over a launch
// policy so the CPU emulator of the tests runs the same code as the launchers (detail::CudaLaunch).
//
// A decoding step has few (row, query head) pairs, and a block that walks the whole cache is a chain of
// dependent trips to memory. So a block takes one row, the query heads of one KV head (heads_per_block: they
// read the same keys) and one split of the keys; it loads each tile of kTileKeys keys and values into shared
// memory with every load in flight at once, then scores, softmax and values run from shared memory. A decoding
// step gets as many splits as the workspace allows (split_plan), down to one tile each; each block writes its
// max, sum and unnormalised output (fp32) to the workspace, and a second kernel merges the splits in split order.
// The plan depends only on the shape (never on the device or the step), so a captured step and an eager one
// compute the same values, bit for bit. A long prefill has enough pairs for one split, whose block writes the
// bf16 output directly.
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
inline constexpr int kTileKeys = 32;  // keys per shared-memory tile: one lane each in the softmax
inline constexpr int kMaxHeadsPerBlock = 8;
inline constexpr int kHeadsPerWarp = kMaxHeadsPerBlock / kWarps;  // softmax: warp w takes heads w, w + kWarps
inline constexpr int kMaxOutputsPerThread =
    static_cast<int>(kMaxHeadsPerBlock * kDecodeAttentionMaxHeadDim / kThreads);  // (head, element) accumulators
inline constexpr int kMaxTileVectorsPerThread =
    static_cast<int>(kTileKeys * kDecodeAttentionMaxHeadDim / 8 / kThreads);  // 16-byte loads of K (and of V)
inline constexpr int64_t kMaxAppendBlocks = 1 << 16;

// The shape fields the kernels need, by value (ref::DecodeAttentionShape's helpers are host-only).
struct DeviceShape {
  int64_t T, rows_per_slot, first_slot, capacity, heads, kv_heads, head_dim;
};
inline DeviceShape device_shape(const ref::DecodeAttentionShape& s) {
  return {s.T, s.rows_per_slot, s.first_slot, s.capacity, s.heads, s.kv_heads, s.head_dim};
}

// The query heads a block takes: the largest divisor of heads / kv_heads up to kMaxHeadsPerBlock.
inline int64_t heads_per_block(const ref::DecodeAttentionShape& s) {
  const int64_t group = s.heads / s.kv_heads;
  int64_t n = group < kMaxHeadsPerBlock ? group : kMaxHeadsPerBlock;
  while (group % n != 0) --n;
  return n;
}

// How the keys of a row are split across blocks.
struct SplitPlan {
  int64_t splits = 1;      // blocks per (row, head group)
  int64_t split_keys = 0;  // keys per block (a multiple of kTileKeys); the last block's range may end past the cache
};

// One tile per split where the workspace allows (T x heads x splits <= kDecodeAttentionMaxPartials), else as
// many splits as it allows, each the same whole number of tiles.
inline SplitPlan split_plan(const ref::DecodeAttentionShape& s) {
  const int64_t pairs = s.T * s.heads;
  if (pairs == 0 || s.capacity == 0) return {1, s.capacity};
  const int64_t by_tiles = detail::ceil_div(s.capacity, kTileKeys);
  const int64_t by_workspace = kDecodeAttentionMaxPartials / pairs;
  const int64_t splits = by_tiles < by_workspace ? by_tiles : by_workspace;
  if (splits <= 1) return {1, s.capacity};
  const int64_t keys = detail::round_up(detail::ceil_div(s.capacity, splits), kTileKeys);
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
  int64_t heads_per_block, splits, split_keys;
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

// Shared memory of the split kernel, each region 16-byte aligned: the block's q heads (fp32), a tile of keys
// and one of values (bf16 rows padded by 16 bytes so that lanes reading rows j and j+1 hit different banks),
// the tile's softmax weights per head, and per head the rescale of the tile and the final sum.
struct SplitSmem {
  int64_t row_stride, k, v, weights, rescale, sum, bytes;
};
SG_HOST_DEVICE SplitSmem split_smem(int64_t heads_per_block, int64_t head_dim) {
  SplitSmem m{};
  m.row_stride = detail::round_up(head_dim, 8) + 8;
  const int64_t q_bytes = detail::round_up(heads_per_block * head_dim * 4, 16);
  const int64_t tile_bytes = kTileKeys * m.row_stride * 2;
  m.k = q_bytes;
  m.v = m.k + tile_bytes;
  m.weights = m.v + tile_bytes;
  m.rescale = m.weights + heads_per_block * kTileKeys * 4;
  m.sum = m.rescale + heads_per_block * 4;
  m.bytes = m.sum + heads_per_block * 4;
  return m;
}

// keys[j * d .. + d) for j < n into tile rows of `stride`: every 16-byte load is issued before the first store
// (the loads of a tile are one trip to memory).
SG_DEVICE void load_tile(bf16* k_tile, bf16* v_tile, const bf16* keys, const bf16* values, int n, int64_t d,
                         int64_t stride) {
  const int tid = detail::thread_index();
  if (d % detail::kBf16PerVec == 0) {
    const int64_t per_row = d / detail::kBf16PerVec, total = n * per_row;
    uint4 k[kMaxTileVectorsPerThread], v[kMaxTileVectorsPerThread];
    SG_UNROLL
    for (int i = 0; i < kMaxTileVectorsPerThread; ++i) {
      const int64_t idx = tid + static_cast<int64_t>(i) * kThreads;
      if (idx < total) {
        const int64_t at = idx / per_row * d + idx % per_row * detail::kBf16PerVec;
        k[i] = detail::load_16_bytes(keys + at);
        v[i] = detail::load_16_bytes(values + at);
      }
    }
    SG_UNROLL
    for (int i = 0; i < kMaxTileVectorsPerThread; ++i) {
      const int64_t idx = tid + static_cast<int64_t>(i) * kThreads;
      if (idx < total) {
        const int64_t at = idx / per_row * stride + idx % per_row * detail::kBf16PerVec;
        detail::store_16_bytes(k_tile + at, k[i]);
        detail::store_16_bytes(v_tile + at, v[i]);
      }
    }
  } else {  // head_dim not a multiple of 8 (rare): element by element
    for (int64_t idx = tid; idx < n * d; idx += kThreads) {
      const int64_t at = idx / d * stride + idx % d;
      k_tile[at] = keys[idx];
      v_tile[at] = values[idx];
    }
  }
}

// One block per (row, head group of heads_per_block query heads sharing a KV head, split): an online softmax over
// the split's tiles. Per tile: keys and values into shared memory; warp w scores heads w, w + kWarps (lane j: key
// j of the tile), takes the tile's max and sum by butterflies and writes the weights; then each thread adds the
// weighted values, in key order, to its (head, element) accumulators.
SG_KERNEL(kThreads) attention_split_kernel(AttentionArgs a) {
  const DeviceShape& s = a.s;
  const int64_t t = detail::block_index_x(), split = detail::block_index_z();
  const int64_t hpb = a.heads_per_block, head0 = detail::block_index_y() * hpb;
  const int64_t d = s.head_dim, width = (s.heads + 2 * s.kv_heads) * d, outputs = hpb * d;
  const int tid = detail::thread_index();
  const int lane = static_cast<int>(detail::lane_id()), warp = static_cast<int>(detail::warp_id());
  const int32_t pos = a.positions[t];
  if (!position_valid(pos, s)) {  // a caller bug: NaN in the logits (the merge writes it when there are splits)
    if (a.splits == 1) {
      for (int64_t p = tid; p < outputs; p += kThreads)
        a.out[(t * s.heads + head0) * d + p] = __float2bfloat16_rn(nanf(""));
    }
    return;
  }
  const int64_t n = static_cast<int64_t>(pos) + 1;
  const int64_t first = split * a.split_keys;
  if (first >= n) return;  // past the row's position: the merge reads only the splits before it
  const int64_t last = first + a.split_keys < n ? first + a.split_keys : n;  // keys [first, last)
  const SplitSmem m = split_smem(hpb, d);
  unsigned char* smem = detail::dynamic_smem();
  float* q = reinterpret_cast<float*>(smem);
  bf16* k_tile = reinterpret_cast<bf16*>(smem + m.k);
  bf16* v_tile = reinterpret_cast<bf16*>(smem + m.v);
  float* weights = reinterpret_cast<float*>(smem + m.weights);  // [hpb][kTileKeys]
  float* rescale = reinterpret_cast<float*>(smem + m.rescale);  // [hpb]
  float* final_sum = reinterpret_cast<float*>(smem + m.sum);    // [hpb]
  const int64_t g = head0 / (s.heads / s.kv_heads);
  const int64_t slot = s.first_slot + t / s.rows_per_slot;
  const bf16* keys = a.k_cache + cache_offset(s, slot, g, 0);
  const bf16* values = a.v_cache + cache_offset(s, slot, g, 0);
  for (int64_t p = tid; p < outputs; p += kThreads) q[p] = __bfloat162float(a.qkv[t * width + head0 * d + p]);

  float acc[kMaxOutputsPerThread];  // output p = tid + i kThreads: head p / d, element p % d
  SG_UNROLL
  for (int i = 0; i < kMaxOutputsPerThread; ++i) acc[i] = 0.0f;
  float running_max[kHeadsPerWarp], running_sum[kHeadsPerWarp];  // of heads warp + k kWarps, in every lane
  SG_UNROLL
  for (int k = 0; k < kHeadsPerWarp; ++k) {
    running_max[k] = -INFINITY;
    running_sum[k] = 0.0f;
  }
  const bool vec = d % detail::kBf16PerVec == 0;
  for (int64_t c0 = first; c0 < last; c0 += kTileKeys) {
    const int tile = last - c0 < kTileKeys ? static_cast<int>(last - c0) : kTileKeys;
    load_tile(k_tile, v_tile, keys + c0 * d, values + c0 * d, tile, d, m.row_stride);
    detail::block_sync();  // the tile (and q) written
    SG_UNROLL
    for (int k = 0; k < kHeadsPerWarp; ++k) {
      const int64_t h = warp + k * kWarps;
      if (h >= hpb) break;
      float score = -INFINITY;
      if (lane < tile) {
        const bf16* key = k_tile + lane * m.row_stride;
        const float* qh = q + h * d;
        float dot = 0.0f;
        if (vec) {
          for (int64_t e = 0; e < d; e += detail::kBf16PerVec) {
            float kv[detail::kBf16PerVec];
            detail::load_bf16<detail::kBf16PerVec>(key + e, kv);
            SG_UNROLL
            for (int x = 0; x < detail::kBf16PerVec; ++x) dot = fmaf(qh[e + x], kv[x], dot);
          }
        } else {
          for (int64_t e = 0; e < d; ++e) dot = fmaf(qh[e], __bfloat162float(key[e]), dot);
        }
        score = dot * a.scale;
      }
      const float new_max = fmaxf(running_max[k], detail::warp_reduce_max(score));
      const float w = lane < tile ? expf(score - new_max) : 0.0f;
      weights[h * kTileKeys + lane] = w;
      const float r = expf(running_max[k] - new_max);  // 0 for the first tile (exp(-inf))
      running_sum[k] = running_sum[k] * r + detail::warp_reduce_sum(w);
      running_max[k] = new_max;
      if (lane == 0) rescale[h] = r;
    }
    detail::block_sync();  // weights and rescales written
    SG_UNROLL
    for (int i = 0; i < kMaxOutputsPerThread; ++i) {
      const int64_t p = tid + static_cast<int64_t>(i) * kThreads;
      if (p >= outputs) break;
      const int64_t h = p / d, e = p % d;
      const float* wh = weights + h * kTileKeys;
      float sum = acc[i] * rescale[h];
      for (int j = 0; j < tile; ++j) sum = fmaf(wh[j], __bfloat162float(v_tile[j * m.row_stride + e]), sum);
      acc[i] = sum;
    }
    detail::block_sync();  // the next tile overwrites K, V, weights and rescales
  }
  // Normalised into the output with one split, else the split's partial result (max, sum, values).
  SG_UNROLL
  for (int k = 0; k < kHeadsPerWarp; ++k) {
    const int64_t h = warp + k * kWarps;
    if (h >= hpb || lane != 0) continue;
    final_sum[h] = running_sum[k];
    if (a.splits > 1) {
      float* mine = partial_at(a, t, head0 + h, split);
      mine[0] = running_max[k];
      mine[1] = running_sum[k];
    }
  }
  detail::block_sync();
  SG_UNROLL
  for (int i = 0; i < kMaxOutputsPerThread; ++i) {
    const int64_t p = tid + static_cast<int64_t>(i) * kThreads;
    if (p >= outputs) break;
    const int64_t h = p / d, e = p % d;
    if (a.splits > 1) {
      partial_at(a, t, head0 + h, split)[2 + e] = acc[i];
    } else {
      a.out[(t * s.heads + head0) * d + p] = __float2bfloat16_rn(acc[i] * (1.0f / final_sum[h]));
    }
  }
}

inline int merge_threads(int64_t head_dim) {
  return static_cast<int>(detail::round_up(head_dim, 32));
}

// One block per (row, query head), one thread per output element: the results of the splits that hold keys up to
// the row's position rescaled to the largest max and added in split order (split 0 always holds key 0, so the
// largest max is finite). The later splits wrote nothing.
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
  const int64_t written = detail::ceil_div(static_cast<int64_t>(a.positions[t]) + 1, a.split_keys);
  float m = -INFINITY;
  for (int64_t split = 0; split < written; ++split) m = fmaxf(m, partial_at(a, t, h, split)[0]);
  float sum = 0.0f, value = 0.0f;
  for (int64_t split = 0; split < written; ++split) {
    const float* p = partial_at(a, t, h, split);
    const float w = expf(p[0] - m);
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
  const size_t reserve = decode_attention_workspace_bytes(s.head_dim);
  SG_CHECK(need <= reserve, strprintf("%s: the split plan needs %zu bytes of workspace, over the %zu that callers "
                                      "reserve (a bug in split_plan)",
                                      op, need, reserve));
  SG_CHECK(need == 0 || (p.workspace != nullptr && p.workspace_bytes >= need),
           strprintf("%s: %lld rows x %lld heads split %lld ways need a workspace of %zu bytes; got %zu at %p "
                     "(reserve decode_attention_workspace_bytes(head_dim) = %zu)",
                     op, static_cast<long long>(s.T), static_cast<long long>(s.heads),
                     static_cast<long long>(plan.splits), need, p.workspace_bytes, p.workspace, reserve));
  const int64_t hpb = heads_per_block(s);
  const AttentionArgs args{.out = p.out,
                           .qkv = p.qkv,
                           .k_cache = p.k_cache,
                           .v_cache = p.v_cache,
                           .positions = p.positions,
                           .workspace = static_cast<float*>(p.workspace),
                           .s = device_shape(s),
                           .heads_per_block = hpb,
                           .splits = plan.splits,
                           .split_keys = plan.split_keys,
                           .scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(s.head_dim)))};
  const auto rows = static_cast<unsigned>(s.T);
  launch("attention_split_kernel", attention_split_kernel,
         dim3(rows, static_cast<unsigned>(s.heads / hpb), static_cast<unsigned>(plan.splits)), kThreads,
         static_cast<size_t>(split_smem(hpb, s.head_dim).bytes), args);
  if (plan.splits > 1) {
    launch("attention_merge_kernel", attention_merge_kernel, dim3(rows, static_cast<unsigned>(s.heads)),
           merge_threads(s.head_dim), 0, args);
  }
}

SG_EMULATED_NAMESPACE_END
}  // namespace sg::kernels::decode_attention
