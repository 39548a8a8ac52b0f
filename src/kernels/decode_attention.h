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
// Work split of decode_attention_forward (kernels/decode_attention.cuh): the keys of each (row, query head)
// are split across blocks until the grid has about kDecodeAttentionTargetBlocks blocks (a decoding step of a
// few sequences; a prefill has enough rows and runs one split), each split an online softmax over its keys
// (chunks of 1024 scores in shared memory, so any cache capacity works), and a second kernel merges the
// splits in split order. The split depends only on the shape and every sum runs in a fixed order, so results
// are bitwise reproducible, captured or eager. head_dim <= 256.
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
inline constexpr int64_t kDecodeAttentionTargetBlocks = 256;  // about two per SM of an H100 or H200
inline constexpr int64_t kDecodeAttentionMinSplitKeys = 64;
// The workspace the splits need at most: T x heads x splits < 2 x kDecodeAttentionTargetBlocks (row, head, split)
// triples whenever there is more than one split, each its max, its sum and head_dim values (fp32).
inline constexpr size_t kDecodeAttentionWorkspaceBytes =
    2 * kDecodeAttentionTargetBlocks * (2 + kDecodeAttentionMaxHeadDim) * sizeof(float);

struct DecodeAttentionParams {
  bf16* out = nullptr;            // [T, heads * head_dim]
  const bf16* qkv = nullptr;      // [T, qkv_width]: the q heads are read
  const bf16* k_cache = nullptr;  // [slots, kv_heads, capacity, head_dim]
  const bf16* v_cache = nullptr;
  const int32_t* positions = nullptr;  // device [T]
  ref::DecodeAttentionShape shape;
  void* workspace = nullptr;  // kDecodeAttentionWorkspaceBytes, 16-byte aligned; unused (may be null) by a prefill
  size_t workspace_bytes = 0;
};
void decode_attention_forward(cudaStream_t stream, const DecodeAttentionParams& p);

}  // namespace sg::kernels
