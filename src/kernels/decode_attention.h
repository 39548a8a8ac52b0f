#pragma once
// Attention of new query rows over a KV cache, for generation: the prefill of a prompt and the
// one-token decoding step use the same kernels. CPU twin: reference/decode_attention.h (layouts,
// slots, positions and math are described there).
//
//   kv_cache_append            writes each row's k and v heads (after RoPE) into the cache at the row's
//                              position: [slot, kv head, position, :]
//   decode_attention_forward   each (row, query head) attends over positions 0..positions[t] of its
//                              slot: fp32 scores and softmax, bf16 output
//
// Positions are read from device memory, so a captured decoding step serves every step of a
// generation (the host never passes a per-step value). Graph-safe: no allocation, no sync.
//
// Work split of decode_attention_forward (kernels/decode_attention.cuh): a block takes one row, the query heads
// of one KV head (up to 8; they read the same keys, so each tile of 32 keys and values is loaded once into
// shared memory for all of them) and one split of the keys, an online softmax over its tiles. A decoding step
// has few rows, so its keys are split into tiles of their own (as many splits as the workspace's
// kDecodeAttentionMaxPartials allow): each block makes one trip to memory instead of walking the cache. A
// second kernel merges a row's splits in split order. The split depends only on the shape and every sum runs
// in a fixed order, so results are bitwise reproducible, captured or eager. head_dim <= 256.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "cuda/bf16.h"
#include "reference/decode_attention.h"

namespace sg::kernels {

struct KvCacheAppendParams {
  bf16* k_cache = nullptr;             // [slots, kv_heads, capacity, head_dim]
  bf16* v_cache = nullptr;             // same
  const bf16* qkv = nullptr;           // [T, qkv_width] after RoPE
  const int32_t* positions = nullptr;  // device [T]
  ref::DecodeAttentionShape shape;
};
void kv_cache_append(cudaStream_t stream, const KvCacheAppendParams& p);

inline constexpr int64_t kDecodeAttentionMaxHeadDim = 256;
// (row, query head, split) partial results the workspace holds: the splits of a step with T rows and H query
// heads are at most kDecodeAttentionMaxPartials / (T x H).
inline constexpr int64_t kDecodeAttentionMaxPartials = 4096;
// The workspace decode_attention_forward needs at most for a model's head_dim: each partial result's max, sum
// and head_dim values (fp32).
constexpr size_t decode_attention_workspace_bytes(int64_t head_dim) {
  return static_cast<size_t>(kDecodeAttentionMaxPartials * (2 + head_dim)) * sizeof(float);
}

struct DecodeAttentionParams {
  bf16* out = nullptr;            // [T, heads * head_dim]
  const bf16* qkv = nullptr;      // [T, qkv_width]: the q heads are read
  const bf16* k_cache = nullptr;  // [slots, kv_heads, capacity, head_dim]
  const bf16* v_cache = nullptr;
  const int32_t* positions = nullptr;  // device [T]
  ref::DecodeAttentionShape shape;
  // decode_attention_workspace_bytes(head_dim), 16-byte aligned; may be null where the plan has one split
  // (T x heads > kDecodeAttentionMaxPartials / 2, as in a long prefill, or a capacity of at most 32 keys).
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
};
void decode_attention_forward(cudaStream_t stream, const DecodeAttentionParams& p);

}  // namespace sg::kernels
