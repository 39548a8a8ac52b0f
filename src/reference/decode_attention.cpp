#include "reference/decode_attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/error.h"
#include "core/strings.h"

namespace sg::ref {

void check_decode_attention_shape(const DecodeAttentionShape& s) {
  SG_CHECK(s.T >= 0 && s.rows_per_slot > 0 && s.first_slot >= 0 && s.slots > 0 && s.capacity > 0 && s.heads > 0 &&
               s.kv_heads > 0 && s.head_dim > 0,
           strprintf("decode attention: bad shape T=%lld rows_per_slot=%lld first_slot=%lld slots=%lld capacity=%lld "
                     "heads=%lld kv_heads=%lld head_dim=%lld (sizes must be positive, T and first_slot >= 0)",
                     static_cast<long long>(s.T), static_cast<long long>(s.rows_per_slot),
                     static_cast<long long>(s.first_slot), static_cast<long long>(s.slots),
                     static_cast<long long>(s.capacity), static_cast<long long>(s.heads),
                     static_cast<long long>(s.kv_heads), static_cast<long long>(s.head_dim)));
  SG_CHECK(s.heads % s.kv_heads == 0, strprintf("decode attention: heads = %lld is not a multiple of kv_heads = %lld",
                                                static_cast<long long>(s.heads), static_cast<long long>(s.kv_heads)));
  const int64_t last_slot = s.T == 0 ? s.first_slot : s.first_slot + (s.T - 1) / s.rows_per_slot;
  SG_CHECK(last_slot < s.slots, strprintf("decode attention: rows reach slot %lld but the cache holds %lld slots",
                                          static_cast<long long>(last_slot), static_cast<long long>(s.slots)));
}

namespace {
bool position_ok(int32_t pos, const DecodeAttentionShape& s) {
  return pos >= 0 && pos < s.capacity;
}
int64_t slot_of(int64_t t, const DecodeAttentionShape& s) {
  return s.first_slot + t / s.rows_per_slot;
}
}  // namespace

void kv_cache_append(float* k_cache, float* v_cache, const float* qkv, const int32_t* positions,
                     const DecodeAttentionShape& s) {
  check_decode_attention_shape(s);
  const int64_t d = s.head_dim, W = s.qkv_width();
  for (int64_t t = 0; t < s.T; ++t) {
    if (!position_ok(positions[t], s)) continue;
    const int64_t slot = slot_of(t, s);
    for (int64_t g = 0; g < s.kv_heads; ++g) {
      const float* k = qkv + t * W + (s.heads + g) * d;
      const float* v = qkv + t * W + (s.heads + s.kv_heads + g) * d;
      const int64_t at = s.cache_offset(slot, g, positions[t]);
      std::copy(k, k + d, k_cache + at);
      std::copy(v, v + d, v_cache + at);
    }
  }
}

void decode_attention_forward(float* out, const float* qkv, const float* k_cache, const float* v_cache,
                              const int32_t* positions, const DecodeAttentionShape& s) {
  check_decode_attention_shape(s);
  const int64_t d = s.head_dim, W = s.qkv_width(), group = s.heads / s.kv_heads;
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  std::vector<double> scores, acc(static_cast<size_t>(d));
  for (int64_t t = 0; t < s.T; ++t) {
    const int32_t pos = positions[t];
    for (int64_t h = 0; h < s.heads; ++h) {
      float* o = out + (t * s.heads + h) * d;
      if (!position_ok(pos, s)) {
        std::fill(o, o + d, std::numeric_limits<float>::quiet_NaN());
        continue;
      }
      const int64_t g = h / group, slot = slot_of(t, s);
      const float* q = qkv + t * W + h * d;
      scores.assign(static_cast<size_t>(pos) + 1, 0.0);
      double m = -std::numeric_limits<double>::infinity();
      for (int64_t j = 0; j <= pos; ++j) {
        const float* k = k_cache + s.cache_offset(slot, g, j);
        double dot = 0.0;
        for (int64_t e = 0; e < d; ++e) dot += static_cast<double>(q[e]) * k[e];
        scores[j] = dot * scale;
        m = std::max(m, scores[j]);
      }
      double sum = 0.0;
      for (double& x : scores) sum += (x = std::exp(x - m));
      std::fill(acc.begin(), acc.end(), 0.0);
      for (int64_t j = 0; j <= pos; ++j) {
        const float* v = v_cache + s.cache_offset(slot, g, j);
        for (int64_t e = 0; e < d; ++e) acc[e] += scores[j] * v[e];
      }
      for (int64_t e = 0; e < d; ++e) o[e] = static_cast<float>(acc[e] / sum);
    }
  }
}

}  // namespace sg::ref
