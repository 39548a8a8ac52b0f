// KV-cache attention reference: a prefill (all rows of a prompt at once) and a token-by-token decode
// both equal the training attention twin (reference/attention.h) on the whole sequence; sequences in
// different slots do not see each other; a position outside the cache writes NaN and leaves the
// cache alone; bad shapes are refused.
#include "reference/decode_attention.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>
#include <vector>

#include "core/error.h"
#include "reference/attention.h"
#include "test_util.h"

namespace sg {
namespace {

ref::DecodeAttentionShape cache_shape(int64_t slots, int64_t capacity, int64_t heads, int64_t kv_heads, int64_t d) {
  return {.slots = slots, .capacity = capacity, .heads = heads, .kv_heads = kv_heads, .head_dim = d};
}

// Causal attention of one sequence of S rows with the training twin.
std::vector<float> training_attention(const std::vector<float>& qkv, int64_t S, int64_t heads, int64_t kv_heads,
                                      int64_t d) {
  std::vector<float> out(S * heads * d), lse(heads * S);
  ref::attention_forward(out.data(), lse.data(), qkv.data(), 1, S, heads, kv_heads, d, 0.0f, {}, 0);
  return out;
}

TEST(DecodeAttentionReference, PrefillAndTokenByTokenEqualTrainingAttention) {
  for (const auto& [S, heads, kv_heads, d] : {std::array<int64_t, 4>{1, 2, 1, 8}, {13, 4, 2, 16}, {40, 6, 3, 12}}) {
    auto shape = cache_shape(3, S + 5, heads, kv_heads, d);
    const int64_t W = shape.qkv_width();
    const auto qkv = test::random_normal(S * W, 100 + S);
    const auto want = training_attention(qkv, S, heads, kv_heads, d);
    std::vector<int32_t> positions(S);
    std::iota(positions.begin(), positions.end(), 0);
    const size_t cache = 3 * kv_heads * shape.capacity * d;

    // Prefill into slot 1: T = S rows of one slot.
    std::vector<float> k(cache, 0.0f), v(cache, 0.0f), out(S * heads * d, -1.0f);
    shape.T = S;
    shape.rows_per_slot = S;
    shape.first_slot = 1;
    ref::kv_cache_append(k.data(), v.data(), qkv.data(), positions.data(), shape);
    ref::decode_attention_forward(out.data(), qkv.data(), k.data(), v.data(), positions.data(), shape);
    EXPECT_LT(test::relative_error(out, want), 1e-6) << "S=" << S;
    // Only slot 1 was written.
    for (size_t i = 0; i < cache; ++i) {
      const bool in_slot1 = i / (kv_heads * shape.capacity * d) == 1;
      if (!in_slot1) {
        ASSERT_EQ(k[i], 0.0f) << i;
      }
    }

    // Token by token into slot 2: each row appended then attending to the cache so far.
    std::vector<float> k2(cache, 0.0f), v2(cache, 0.0f), out2(S * heads * d);
    shape.T = 1;
    shape.rows_per_slot = 1;
    shape.first_slot = 2;
    for (int64_t t = 0; t < S; ++t) {
      const int32_t pos = static_cast<int32_t>(t);
      ref::kv_cache_append(k2.data(), v2.data(), qkv.data() + t * W, &pos, shape);
      ref::decode_attention_forward(out2.data() + t * heads * d, qkv.data() + t * W, k2.data(), v2.data(), &pos, shape);
    }
    EXPECT_LT(test::relative_error(out2, want), 1e-6) << "S=" << S;
  }
}

TEST(DecodeAttentionReference, BatchRowsUseTheirOwnSlotAndPosition) {
  // Two sequences prefilled with different lengths, then one decoding row each (T = 2, rows_per_slot 1):
  // each equals the training attention of its own sequence extended by that row.
  const int64_t heads = 4, kv_heads = 2, d = 8;
  auto shape = cache_shape(2, 32, heads, kv_heads, d);
  const int64_t W = shape.qkv_width();
  const int64_t lengths[2] = {5, 11};
  std::vector<std::vector<float>> seqs;
  const size_t cache = 2 * kv_heads * 32 * d;
  std::vector<float> k(cache), v(cache), out(heads * d * 2);
  for (int64_t b = 0; b < 2; ++b) {
    seqs.push_back(test::random_normal((lengths[b] + 1) * W, 7 + b));
    std::vector<int32_t> pos(lengths[b]);
    std::iota(pos.begin(), pos.end(), 0);
    shape.T = lengths[b];
    shape.rows_per_slot = lengths[b];
    shape.first_slot = b;
    ref::kv_cache_append(k.data(), v.data(), seqs[b].data(), pos.data(), shape);
  }
  std::vector<float> rows(2 * W);
  for (int64_t b = 0; b < 2; ++b) std::copy_n(seqs[b].begin() + lengths[b] * W, W, rows.begin() + b * W);
  const int32_t positions[2] = {static_cast<int32_t>(lengths[0]), static_cast<int32_t>(lengths[1])};
  shape.T = 2;
  shape.rows_per_slot = 1;
  shape.first_slot = 0;
  ref::kv_cache_append(k.data(), v.data(), rows.data(), positions, shape);
  ref::decode_attention_forward(out.data(), rows.data(), k.data(), v.data(), positions, shape);
  for (int64_t b = 0; b < 2; ++b) {
    const auto full = training_attention(seqs[b], lengths[b] + 1, heads, kv_heads, d);
    const std::vector<float> want(full.end() - heads * d, full.end());
    const std::vector<float> got(out.begin() + b * heads * d, out.begin() + (b + 1) * heads * d);
    EXPECT_LT(test::relative_error(got, want), 1e-6) << "sequence " << b;
  }
}

TEST(DecodeAttentionReference, PositionOutsideTheCacheGivesNanAndNoWrite) {
  auto shape = cache_shape(1, 4, 2, 1, 4);
  shape.T = 1;
  const auto qkv = test::random_normal(shape.qkv_width(), 3);
  std::vector<float> k(4 * 4, 0.0f), v(4 * 4, 0.0f), out(8, 0.0f);
  for (const int32_t pos : {-1, 4, 1000}) {
    ref::kv_cache_append(k.data(), v.data(), qkv.data(), &pos, shape);
    ref::decode_attention_forward(out.data(), qkv.data(), k.data(), v.data(), &pos, shape);
    for (float x : k) ASSERT_EQ(x, 0.0f);
    for (float x : out) ASSERT_TRUE(std::isnan(x)) << "position " << pos;
  }
}

TEST(DecodeAttentionReference, RefusesBadShapes) {
  auto shape = cache_shape(2, 8, 4, 3, 8);  // 4 heads, 3 kv heads
  shape.T = 1;
  EXPECT_NE(test::thrown_message([&] { ref::check_decode_attention_shape(shape); }).find("multiple of kv_heads"),
            std::string::npos);
  shape = cache_shape(2, 8, 4, 2, 8);
  shape.T = 9;
  shape.rows_per_slot = 3;  // rows reach slot 2 of 2
  EXPECT_NE(test::thrown_message([&] { ref::check_decode_attention_shape(shape); }).find("slot 2"), std::string::npos);
}

}  // namespace
}  // namespace sg
