// CPU reference attention: forward against an independent naive double-precision computation (full
// masked score matrix, per head), GQA against multi-head attention with replicated K/V heads, backward
// against central finite differences of L = sum(R * out) with and without dropout, and the dropout
// contract (deterministic per RNG state, unbiased, mask follows (seed, offset)).
#include "reference/attention.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "core/error.h"
#include "test_util.h"

namespace sg {
namespace {

struct Shape {
  int64_t B, S, heads, kv_heads, d;
  int64_t W() const { return (heads + 2 * kv_heads) * d; }
  int64_t H() const { return heads * d; }
  int64_t T() const { return B * S; }
};

constexpr rng::RngState kState{1234, 7};
constexpr uint32_t kSite = 3;

// Straightforward textbook attention in double: scores for all (i, j), masked to -inf above the
// diagonal, softmax, times V. The kv head of query head h is floor(h * kv_heads / heads).
void naive_attention(const Shape& s, const std::vector<float>& qkv, std::vector<double>& out,
                     std::vector<double>& lse) {
  out.assign(s.T() * s.H(), 0.0);
  lse.assign(s.B * s.heads * s.S, 0.0);
  const double scale = 1.0 / std::sqrt(static_cast<double>(s.d));
  std::vector<double> scores(s.S * s.S);
  for (int64_t b = 0; b < s.B; ++b) {
    for (int64_t h = 0; h < s.heads; ++h) {
      const int64_t g = h * s.kv_heads / s.heads;
      auto Q = [&](int64_t i, int64_t e) { return double(qkv[(b * s.S + i) * s.W() + h * s.d + e]); };
      auto K = [&](int64_t j, int64_t e) { return double(qkv[(b * s.S + j) * s.W() + (s.heads + g) * s.d + e]); };
      auto V = [&](int64_t j, int64_t e) {
        return double(qkv[(b * s.S + j) * s.W() + (s.heads + s.kv_heads + g) * s.d + e]);
      };
      for (int64_t i = 0; i < s.S; ++i) {
        for (int64_t j = 0; j < s.S; ++j) {
          double dot = 0.0;
          for (int64_t e = 0; e < s.d; ++e) dot += Q(i, e) * K(j, e);
          scores[i * s.S + j] = j <= i ? dot * scale : -std::numeric_limits<double>::infinity();
        }
        double m = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < s.S; ++j) m = std::max(m, scores[i * s.S + j]);
        double sum = 0.0;
        for (int64_t j = 0; j < s.S; ++j) sum += std::exp(scores[i * s.S + j] - m);
        lse[(b * s.heads + h) * s.S + i] = m + std::log(sum);
        for (int64_t e = 0; e < s.d; ++e) {
          double acc = 0.0;
          for (int64_t j = 0; j < s.S; ++j) acc += std::exp(scores[i * s.S + j] - m) / sum * V(j, e);
          out[(b * s.S + i) * s.H() + h * s.d + e] = acc;
        }
      }
    }
  }
}

std::vector<float> to_float(const std::vector<double>& v) { return {v.begin(), v.end()}; }

class ReferenceAttention : public ::testing::TestWithParam<Shape> {};

TEST_P(ReferenceAttention, ForwardMatchesNaiveDouble) {
  const Shape s = GetParam();
  const auto qkv = test::random_normal(s.T() * s.W(), 11);
  std::vector<float> out(s.T() * s.H(), NAN), lse(s.B * s.heads * s.S, NAN);
  ref::attention_forward(out.data(), lse.data(), qkv.data(), s.B, s.S, s.heads, s.kv_heads, s.d, 0.0f, kState,
                         kSite);
  std::vector<double> nout, nlse;
  naive_attention(s, qkv, nout, nlse);
  EXPECT_LT(test::relative_error(out, to_float(nout)), 1e-6);
  EXPECT_LT(test::relative_error(lse, to_float(nlse)), 1e-6);
}

TEST_P(ReferenceAttention, BackwardMatchesFiniteDifferences) {
  const Shape s = GetParam();
  for (const float p : {0.0f, 0.3f}) {
    SCOPED_TRACE(p);
    const auto qkv = test::random_normal(s.T() * s.W(), 21);
    const auto r = test::random_normal(s.T() * s.H(), 22);  // dL/dout
    std::vector<float> out(s.T() * s.H()), lse(s.B * s.heads * s.S);
    auto forward_loss = [&](const std::vector<float>& x) {
      std::vector<float> o(s.T() * s.H()), l(s.B * s.heads * s.S);
      ref::attention_forward(o.data(), l.data(), x.data(), s.B, s.S, s.heads, s.kv_heads, s.d, p, kState, kSite);
      double acc = 0.0;
      for (size_t i = 0; i < o.size(); ++i) acc += static_cast<double>(r[i]) * o[i];
      return acc;
    };
    ref::attention_forward(out.data(), lse.data(), qkv.data(), s.B, s.S, s.heads, s.kv_heads, s.d, p, kState,
                           kSite);
    std::vector<float> dqkv(qkv.size(), NAN);
    ref::attention_backward(dqkv.data(), r.data(), qkv.data(), out.data(), lse.data(), s.B, s.S, s.heads,
                            s.kv_heads, s.d, p, kState, kSite);
    // The dropout mask does not depend on the inputs, so finite differences see the same mask.
    const float h = 1e-2f;
    std::vector<float> fd(qkv.size());
    for (size_t i = 0; i < qkv.size(); ++i) {
      auto xp = qkv, xm = qkv;
      xp[i] += h;
      xm[i] -= h;
      fd[i] = static_cast<float>((forward_loss(xp) - forward_loss(xm)) / (2.0 * h));
    }
    EXPECT_LT(test::relative_error(dqkv, fd), 2e-4);  // observed ~1e-5
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, ReferenceAttention,
                         ::testing::Values(Shape{1, 4, 1, 1, 4},    // plain single head
                                           Shape{2, 5, 4, 2, 4},    // GQA, two sequences
                                           Shape{1, 7, 3, 1, 8},    // MQA, odd S
                                           Shape{2, 3, 2, 2, 2}));  // MHA

TEST(ReferenceAttentionGqa, EqualsMultiHeadWithReplicatedKv) {
  const Shape gqa{2, 6, 4, 2, 4};
  const Shape mha{2, 6, 4, 4, 4};
  const auto qkv = test::random_normal(gqa.T() * gqa.W(), 31);
  std::vector<float> qkv_mha(mha.T() * mha.W());
  for (int64_t t = 0; t < gqa.T(); ++t) {
    const float* src = qkv.data() + t * gqa.W();
    float* dst = qkv_mha.data() + t * mha.W();
    for (int64_t e = 0; e < gqa.H(); ++e) dst[e] = src[e];  // q
    for (int64_t h = 0; h < mha.heads; ++h) {
      const int64_t g = h / (gqa.heads / gqa.kv_heads);
      for (int64_t e = 0; e < gqa.d; ++e) {
        dst[(mha.heads + h) * mha.d + e] = src[(gqa.heads + g) * gqa.d + e];
        dst[(2 * mha.heads + h) * mha.d + e] = src[(gqa.heads + gqa.kv_heads + g) * gqa.d + e];
      }
    }
  }
  std::vector<float> out_gqa(gqa.T() * gqa.H()), lse_gqa(gqa.B * gqa.heads * gqa.S);
  std::vector<float> out_mha(out_gqa.size()), lse_mha(lse_gqa.size());
  ref::attention_forward(out_gqa.data(), lse_gqa.data(), qkv.data(), gqa.B, gqa.S, gqa.heads, gqa.kv_heads, gqa.d,
                         0.0f, kState, kSite);
  ref::attention_forward(out_mha.data(), lse_mha.data(), qkv_mha.data(), mha.B, mha.S, mha.heads, mha.kv_heads,
                         mha.d, 0.0f, kState, kSite);
  EXPECT_EQ(out_gqa, out_mha);
  EXPECT_EQ(lse_gqa, lse_mha);
}

TEST(ReferenceAttentionDropout, DeterministicPerStateAndUnbiased) {
  const Shape s{1, 64, 4, 4, 8};
  auto qkv = test::random_normal(s.T() * s.W(), 41, 0.3f);
  // V = 1 everywhere: each output element is sum_j p_ij * mask_ij / (1 - p), expectation 1.
  for (int64_t t = 0; t < s.T(); ++t)
    for (int64_t e = 2 * s.H(); e < s.W(); ++e) qkv[t * s.W() + e] = 1.0f;
  const float p = 0.25f;
  auto run = [&](float prob, rng::RngState st, uint32_t site) {
    std::vector<float> out(s.T() * s.H()), lse(s.B * s.heads * s.S);
    ref::attention_forward(out.data(), lse.data(), qkv.data(), s.B, s.S, s.heads, s.kv_heads, s.d, prob, st, site);
    return out;
  };
  const auto base = run(0.0f, kState, kSite);
  const auto a = run(p, kState, kSite);
  EXPECT_EQ(a, run(p, kState, kSite));                                  // same state: same mask
  EXPECT_NE(a, base);                                                   // dropout does something
  EXPECT_NE(a, run(p, rng::RngState{kState.seed, kState.offset + 1}, kSite));  // offset changes the mask
  EXPECT_NE(a, run(p, kState, kSite + 1));                              // site changes the mask
  for (float v : base) EXPECT_NEAR(v, 1.0f, 1e-5f);
  double mean = 0.0;
  for (float v : a) mean += v;
  mean /= static_cast<double>(a.size());
  EXPECT_NEAR(mean, 1.0, 0.1);
  // Query 0 sees only key 0 with probability 1: its output is exactly 0 or 1/(1-p).
  for (int64_t h = 0; h < s.heads; ++h) {
    const float v = a[h * s.d];
    EXPECT_TRUE(v == 0.0f || std::abs(v - 1.0f / (1.0f - p)) < 1e-6f) << v;
  }
}

TEST(ReferenceAttention, RejectsBadShapes) {
  std::vector<float> buf(1024);
  EXPECT_THROW(ref::attention_forward(buf.data(), buf.data(), buf.data(), 1, 4, 3, 2, 4, 0.0f, kState, kSite),
               Error);
  EXPECT_THROW(ref::attention_forward(buf.data(), buf.data(), buf.data(), 1, 4, 2, 2, 4, 1.0f, kState, kSite),
               Error);
}

}  // namespace
}  // namespace sg
