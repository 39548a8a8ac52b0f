#include "reference/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "core/error.h"

namespace sg::ref {
namespace {

void check_shape(int64_t B, int64_t S, int64_t heads, int64_t kv_heads, int64_t d, float dropout_p) {
  SG_CHECK(B > 0 && S > 0 && heads > 0 && kv_heads > 0 && d > 0,
           "attention: B, S, heads, kv_heads and head_dim must be positive");
  SG_CHECK(heads % kv_heads == 0, "attention: heads (" + std::to_string(heads) +
                                      ") must be a multiple of kv_heads (" + std::to_string(kv_heads) + ")");
  SG_CHECK(dropout_p >= 0.0f && dropout_p < 1.0f,
           "attention: dropout_p must be in [0, 1), got " + std::to_string(dropout_p));
}

// Row offsets of head h's q and of its kv group's k and v inside a QKV row.
struct HeadColumns {
  int64_t q, k, v;
};
HeadColumns head_columns(int64_t h, int64_t heads, int64_t kv_heads, int64_t d) {
  const int64_t g = h / (heads / kv_heads);
  return {h * d, (heads + g) * d, (heads + kv_heads + g) * d};
}

// Dropout multiplier of probability (b, h, i, j): 0 (dropped) or 1/(1-p) (kept); 1 when p == 0.
double dropout_factor(float p, const rng::RngState& state, uint32_t site, int64_t b, int64_t h, int64_t i,
                      int64_t j, int64_t heads, int64_t S) {
  if (p == 0.0f) return 1.0;
  const uint64_t index = ((static_cast<uint64_t>(b) * heads + h) * S + i) * S + j;
  const bool keep = rng::philox_uniform(state.seed, state.offset, site, index) >= p;
  return keep ? 1.0 / (1.0 - static_cast<double>(p)) : 0.0;
}

double dot(const float* a, const float* b, int64_t d) {
  double acc = 0.0;
  for (int64_t e = 0; e < d; ++e) acc += static_cast<double>(a[e]) * b[e];
  return acc;
}

}  // namespace

void attention_forward(float* out, float* lse, const float* qkv, int64_t B, int64_t S, int64_t heads,
                       int64_t kv_heads, int64_t d, float dropout_p, rng::RngState state, uint32_t site) {
  check_shape(B, S, heads, kv_heads, d, dropout_p);
  const int64_t W = (heads + 2 * kv_heads) * d;
  const int64_t H = heads * d;
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  std::vector<double> s(static_cast<size_t>(S)), acc(static_cast<size_t>(d));
  for (int64_t b = 0; b < B; ++b) {
    const float* seq = qkv + b * S * W;
    for (int64_t h = 0; h < heads; ++h) {
      const HeadColumns c = head_columns(h, heads, kv_heads, d);
      for (int64_t i = 0; i < S; ++i) {
        const float* q = seq + i * W + c.q;
        double m = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j <= i; ++j) {
          s[j] = scale * dot(q, seq + j * W + c.k, d);
          m = std::max(m, s[j]);
        }
        double sum = 0.0;
        for (int64_t j = 0; j <= i; ++j) sum += std::exp(s[j] - m);
        const double l = m + std::log(sum);
        lse[(b * heads + h) * S + i] = static_cast<float>(l);
        std::fill(acc.begin(), acc.end(), 0.0);
        for (int64_t j = 0; j <= i; ++j) {
          const double z = std::exp(s[j] - l) * dropout_factor(dropout_p, state, site, b, h, i, j, heads, S);
          if (z == 0.0) continue;
          const float* v = seq + j * W + c.v;
          for (int64_t e = 0; e < d; ++e) acc[e] += z * v[e];
        }
        float* o = out + (b * S + i) * H + h * d;
        for (int64_t e = 0; e < d; ++e) o[e] = static_cast<float>(acc[e]);
      }
    }
  }
}

// With z_ij = p_ij * m_ij (m the dropout multiplier) and out_i = sum_j z_ij v_j:
//   dv_j += z_ij dout_i,   dz_ij = dout_i . v_j,   dp_ij = dz_ij * m_ij,
//   ds_ij = p_ij (dp_ij - D_i) with D_i = sum_j p_ij dp_ij = sum_j z_ij dz_ij = dout_i . out_i,
//   dq_i += scale * sum_j ds_ij k_j,   dk_j += scale * ds_ij q_i.
// p is recomputed from lse; D from out (as the flash-attention backward does).
void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* out,
                        const float* lse, int64_t B, int64_t S, int64_t heads, int64_t kv_heads, int64_t d,
                        float dropout_p, rng::RngState state, uint32_t site) {
  check_shape(B, S, heads, kv_heads, d, dropout_p);
  const int64_t W = (heads + 2 * kv_heads) * d;
  const int64_t H = heads * d;
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  std::vector<double> grad(static_cast<size_t>(S * W));  // one sequence's dqkv, fixed summation order
  for (int64_t b = 0; b < B; ++b) {
    std::fill(grad.begin(), grad.end(), 0.0);
    const float* seq = qkv + b * S * W;
    for (int64_t h = 0; h < heads; ++h) {
      const HeadColumns c = head_columns(h, heads, kv_heads, d);
      for (int64_t i = 0; i < S; ++i) {
        const float* q = seq + i * W + c.q;
        const float* go = dout + (b * S + i) * H + h * d;
        const double D = dot(go, out + (b * S + i) * H + h * d, d);
        const double l = lse[(b * heads + h) * S + i];
        double* dq = grad.data() + i * W + c.q;
        for (int64_t j = 0; j <= i; ++j) {
          const float* k = seq + j * W + c.k;
          const float* v = seq + j * W + c.v;
          const double p = std::exp(scale * dot(q, k, d) - l);
          const double m = dropout_factor(dropout_p, state, site, b, h, i, j, heads, S);
          const double dp = dot(go, v, d) * m;
          const double ds = p * (dp - D) * scale;
          const double z = p * m;
          double* dk = grad.data() + j * W + c.k;
          double* dv = grad.data() + j * W + c.v;
          for (int64_t e = 0; e < d; ++e) {
            dq[e] += ds * k[e];
            dk[e] += ds * q[e];
            dv[e] += z * go[e];
          }
        }
      }
    }
    float* dst = dqkv + b * S * W;
    for (int64_t x = 0; x < S * W; ++x) dst[x] = static_cast<float>(grad[x]);
  }
}

}  // namespace sg::ref
