#pragma once
// Attention of new query rows over a KV cache, for generation: the prefill of a prompt and the
// one-token decoding step use the same two kernels. CPU twin: reference/decode_attention.h (layouts,
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
// Work split of decode_attention_forward: one block of 128 threads per (row, query head). Keys are
// processed in chunks of 1024 (the scores of a chunk in shared memory, one thread per key) with a
// running max and sum (online softmax), so any cache capacity works with fixed shared memory; the
// value sum runs one warp per key residue (lanes over head_dim) and the warps' partial sums are added
// in a fixed order, so results are bitwise reproducible. head_dim <= 256.
#include <cuda_runtime.h>

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

struct DecodeAttentionParams {
  bf16* out = nullptr;            // [T, heads * head_dim]
  const bf16* qkv = nullptr;      // [T, qkv_width]: the q heads are read
  const bf16* k_cache = nullptr;  // [slots, kv_heads, capacity, head_dim]
  const bf16* v_cache = nullptr;
  const int32_t* positions = nullptr;  // device [T]
  ref::DecodeAttentionShape shape;
};
void decode_attention_forward(cudaStream_t stream, const DecodeAttentionParams& p);

inline constexpr int64_t kDecodeAttentionMaxHeadDim = 256;

}  // namespace sg::kernels
