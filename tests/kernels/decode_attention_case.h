#pragma once
// The scenario of the KV-cache attention tests, shared by the CPU emulator's (decode_attention_emulated_test.cpp)
// and the GPU's (decode_attention_gpu_test.cu): every slot prefilled with a prompt of its own length, then one
// decoding row per slot at each slot's next position, against reference/decode_attention on the same
// bf16-rounded inputs. The backend runs kv_cache_append and decode_attention_forward on its memory:
//   Backend::run(qkv, positions, shape) -> attention output (bf16 values as float)
//   Backend::caches() -> the K and V caches (bf16 values as float)
// kv_cache_append copies bf16 values exactly (bitwise), attention outputs within kBf16RelTol (a bf16 output of
// an fp32 computation). The shapes cover one split and many (kernels/decode_attention.cuh's split_plan), splits
// past a row's position (empty), several tiles in one split, several blocks of query heads per KV head, and
// head_dim not a multiple of 8.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <utility>
#include <vector>

#include "gpu_test_util.h"
#include "reference/decode_attention.h"

namespace sg::test {

struct DecodeAttentionCase {
  int64_t slots, capacity, heads, kv_heads, d, prompt;
};

inline ref::DecodeAttentionShape case_shape(const DecodeAttentionCase& c) {
  return {.slots = c.slots, .capacity = c.capacity, .heads = c.heads, .kv_heads = c.kv_heads, .head_dim = c.d};
}

template <class Backend>
void check_decode_attention_case(const DecodeAttentionCase& c, Backend& backend) {
  ref::DecodeAttentionShape s = case_shape(c);
  const int64_t W = s.qkv_width(), cache = c.slots * c.kv_heads * c.capacity * c.d;
  std::vector<float> k_ref(cache, 0.0f), v_ref(cache, 0.0f);

  // Prefill every slot with a prompt of its own length (slot b: prompt - b tokens, at least 1).
  std::vector<int32_t> lengths(c.slots);
  for (int64_t b = 0; b < c.slots; ++b) {
    const int64_t P = std::max<int64_t>(1, c.prompt - b);
    lengths[b] = static_cast<int32_t>(P);
    const auto qkv = round_bf16(random_normal(P * W, 10 + b + c.d));
    std::vector<int32_t> positions(P);
    std::iota(positions.begin(), positions.end(), 0);
    s.T = P;
    s.rows_per_slot = P;
    s.first_slot = b;
    std::vector<float> out_ref(P * c.heads * c.d);
    ref::kv_cache_append(k_ref.data(), v_ref.data(), qkv.data(), positions.data(), s);
    ref::decode_attention_forward(out_ref.data(), qkv.data(), k_ref.data(), v_ref.data(), positions.data(), s);
    EXPECT_LT(relative_error(backend.run(qkv, positions, s), out_ref), kBf16RelTol) << "prefill of slot " << b;
  }
  {
    const auto [k, v] = backend.caches();
    EXPECT_EQ(k, k_ref) << "the K cache holds exactly the appended bf16 values (and zeros elsewhere)";
    EXPECT_EQ(v, v_ref);
  }

  // One decoding row per slot, each at its own next position.
  s.T = c.slots;
  s.rows_per_slot = 1;
  s.first_slot = 0;
  const auto rows = round_bf16(random_normal(c.slots * W, 99 + c.d));
  std::vector<float> out_ref(c.slots * c.heads * c.d);
  ref::kv_cache_append(k_ref.data(), v_ref.data(), rows.data(), lengths.data(), s);
  ref::decode_attention_forward(out_ref.data(), rows.data(), k_ref.data(), v_ref.data(), lengths.data(), s);
  EXPECT_LT(relative_error(backend.run(rows, lengths, s), out_ref), kBf16RelTol) << "decoding step";
  EXPECT_EQ(backend.caches().first, k_ref);
}

}  // namespace sg::test
