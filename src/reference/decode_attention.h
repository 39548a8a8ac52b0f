#pragma once
// CPU fp32 twin of src/kernels/decode_attention: attention of new query rows over a KV cache, the
// decoding counterpart of reference/attention.h (which attends within whole training sequences).
//
// KV cache: per layer one K and one V buffer, each [slots, kv_heads, capacity, head_dim] (slot = one
// sequence being generated). Rows: T rows of a fused QKV activation [T, (heads+2*kv_heads)*d] (after
// RoPE), laid out as reference/attention.h describes. Row t belongs to slot first_slot + t /
// rows_per_slot and sits at position positions[t] of that sequence:
//   prefill of one prompt of P tokens into slot b:   T = P, rows_per_slot = P, first_slot = b,
//                                                   positions = 0..P-1
//   one decoding step of B sequences:                T = B, rows_per_slot = 1, first_slot = 0,
//                                                   positions[b] = the sequence's current length
//
// kv_cache_append writes row t's k and v heads at [slot, g, positions[t], :].
// decode_attention_forward, for row t, query head h (kv head g = h / (heads / kv_heads)), p = positions[t]:
//   s_j = (q . k_j) / sqrt(d) for j = 0..p of the row's slot (causal: its own position included, so
//   append first), out = sum_j softmax(s)_j v_j.
// A position outside [0, capacity) is a caller bug the GPU cannot report: both sides then leave the
// cache alone and write NaN to the row's output, so the mistake shows in the logits.
#include <cstdint>

namespace sg::ref {

struct DecodeAttentionShape {
  int64_t T = 0;              // query rows
  int64_t rows_per_slot = 1;  // consecutive rows per slot
  int64_t first_slot = 0;     // slot of row 0
  int64_t slots = 0;          // sequences the cache holds
  int64_t capacity = 0;       // positions per sequence
  int64_t heads = 0, kv_heads = 0, head_dim = 0;

  int64_t qkv_width() const { return (heads + 2 * kv_heads) * head_dim; }
  // Element offset of (slot, kv head, position) in a K or V cache buffer.
  int64_t cache_offset(int64_t slot, int64_t g, int64_t pos) const {
    return ((slot * kv_heads + g) * capacity + pos) * head_dim;
  }
};

// Throws sg::Error naming the field for an inconsistent shape (rows beyond the last slot, heads not a
// multiple of kv_heads, ...).
void check_decode_attention_shape(const DecodeAttentionShape& shape);

// k_cache, v_cache [slots, kv_heads, capacity, d]; qkv [T, qkv_width]; positions [T].
void kv_cache_append(float* k_cache, float* v_cache, const float* qkv, const int32_t* positions,
                     const DecodeAttentionShape& shape);

// out [T, heads*d] (overwritten).
void decode_attention_forward(float* out, const float* qkv, const float* k_cache, const float* v_cache,
                              const int32_t* positions, const DecodeAttentionShape& shape);

}  // namespace sg::ref
