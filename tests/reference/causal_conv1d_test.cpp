// Causal conv1d + SiLU reference: hand-computed values, causality and batch isolation, the backward against
// fp64 central finite differences (strided views, untouched columns, gradients added), fp32 vs fp64.
#include "reference/causal_conv1d.h"

#include <gtest/gtest.h>

#include <cmath>
#include <utility>
#include <vector>

#include "test_util.h"

namespace sg {
namespace {

constexpr int64_t W = ref::kCausalConv1dWidth;

double silu(double x) { return x / (1.0 + std::exp(-x)); }

std::vector<double> to_double(const std::vector<float>& v) { return {v.begin(), v.end()}; }

TEST(CausalConv1dReference, ForwardKnownValues) {
  // One channel, weights [1, 2, 3, 4] (weight[3] multiplies the current token), bias 0.5, x = 1..5, read
  // through a stride of 3 whose other columns hold garbage the conv must not see.
  const int64_t S = 5, stride = 3;
  std::vector<float> in(S * stride, 1e6f);
  for (int64_t t = 0; t < S; ++t) in[t * stride] = static_cast<float>(t + 1);
  const std::vector<float> w = {1, 2, 3, 4}, b = {0.5f};
  std::vector<float> out(S);
  ref::causal_conv1d_silu_forward(out.data(), in.data(), stride, w.data(), b.data(), 1, S, 1);
  const double pre[] = {0.5 + 4 * 1, 0.5 + 3 * 1 + 4 * 2, 0.5 + 2 * 1 + 3 * 2 + 4 * 3, 0.5 + 1 + 2 * 2 + 3 * 3 + 4 * 4,
                        0.5 + 2 + 2 * 3 + 3 * 4 + 4 * 5};
  for (int64_t t = 0; t < S; ++t) EXPECT_NEAR(out[t], silu(pre[t]), 1e-5 * pre[t]) << "t=" << t;
}

TEST(CausalConv1dReference, CausalPerSequenceAndPerChannel) {
  const int64_t B = 2, S = 7, C = 3;
  const auto in = test::random_normal(B * S * C, 1);
  const auto w = test::random_normal(C * W, 2);
  const auto b = test::random_normal(C, 3);
  std::vector<float> out(B * S * C), out2(B * S * C);
  ref::causal_conv1d_silu_forward(out.data(), in.data(), C, w.data(), b.data(), B, S, C);
  // Change token 4 of channel 1 in sequence 0: only tokens 4..6 of that channel and sequence may move.
  auto in2 = in;
  in2[(0 * S + 4) * C + 1] += 1.0f;
  ref::causal_conv1d_silu_forward(out2.data(), in2.data(), C, w.data(), b.data(), B, S, C);
  for (int64_t bb = 0; bb < B; ++bb)
    for (int64_t t = 0; t < S; ++t)
      for (int64_t c = 0; c < C; ++c) {
        const int64_t i = (bb * S + t) * C + c;
        const bool may_change = bb == 0 && c == 1 && t >= 4;
        if (may_change) {
          EXPECT_NE(out[i], out2[i]) << "b=" << bb << " t=" << t << " c=" << c;
        } else {
          EXPECT_EQ(out[i], out2[i]) << "b=" << bb << " t=" << t << " c=" << c;
        }
      }
}

TEST(CausalConv1dReference, BackwardMatchesFiniteDifferencesFp64) {
  const int64_t B = 2, S = 6, C = 3, in_stride = 5, din_stride = 7;
  const auto x = to_double(test::random_normal(B * S * in_stride, 11));
  const auto w = to_double(test::random_normal(C * W, 12, 0.7f));
  const auto b = to_double(test::random_normal(C, 13));
  const auto g = to_double(test::random_normal(B * S * C, 14));
  auto loss = [&](const std::vector<double>& xx, const std::vector<double>& ww, const std::vector<double>& bb) {
    std::vector<double> out(B * S * C);
    ref::causal_conv1d_silu_forward_generic<double>(out.data(), xx.data(), in_stride, ww.data(), bb.data(), B, S, C);
    double l = 0.0;
    for (size_t i = 0; i < out.size(); ++i) l += g[i] * out[i];
    return l;
  };
  constexpr double kSentinel = -123.0;
  std::vector<double> dx(B * S * din_stride, kSentinel), dw(C * W, 0.25), db(C, -0.5);
  ref::causal_conv1d_silu_backward_generic<double>(dx.data(), din_stride, dw.data(), db.data(), g.data(), x.data(),
                                                   in_stride, w.data(), b.data(), B, S, C);
  const double step = 1e-6;
  for (int64_t row = 0; row < B * S; ++row) {
    for (int64_t c = 0; c < din_stride; ++c) {
      if (c >= C) {
        EXPECT_EQ(dx[row * din_stride + c], kSentinel) << "column " << c << " outside the view was written";
        continue;
      }
      auto xp = x, xm = x;
      xp[row * in_stride + c] += step;
      xm[row * in_stride + c] -= step;
      const double fd = (loss(xp, w, b) - loss(xm, w, b)) / (2 * step);
      EXPECT_NEAR(dx[row * din_stride + c], fd, 1e-7 * (1.0 + std::fabs(fd))) << "din row " << row << " c " << c;
    }
  }
  for (int64_t i = 0; i < C * W; ++i) {
    auto wp = w, wm = w;
    wp[i] += step;
    wm[i] -= step;
    const double fd = (loss(x, wp, b) - loss(x, wm, b)) / (2 * step);
    EXPECT_NEAR(dw[i] - 0.25, fd, 1e-7 * (1.0 + std::fabs(fd))) << "dweight[" << i << "] (added into 0.25)";
  }
  for (int64_t c = 0; c < C; ++c) {
    auto bp = b, bm = b;
    bp[c] += step;
    bm[c] -= step;
    const double fd = (loss(x, w, bp) - loss(x, w, bm)) / (2 * step);
    EXPECT_NEAR(db[c] + 0.5, fd, 1e-7 * (1.0 + std::fabs(fd))) << "dbias[" << c << "] (added into -0.5)";
  }
}

// Sequences shorter than the filter (S = 1, 2) and S = 3: the zero padding of the first tokens.
TEST(CausalConv1dReference, ShortSequencesMatchFiniteDifferences) {
  for (int64_t S : {1, 2, 3}) {
    const int64_t B = 2, C = 2;
    const auto x = to_double(test::random_normal(B * S * C, 20 + S));
    const auto w = to_double(test::random_normal(C * W, 30 + S));
    const auto b = to_double(test::random_normal(C, 40 + S));
    const auto g = to_double(test::random_normal(B * S * C, 50 + S));
    auto loss = [&](const std::vector<double>& xx) {
      std::vector<double> out(B * S * C);
      ref::causal_conv1d_silu_forward_generic<double>(out.data(), xx.data(), C, w.data(), b.data(), B, S, C);
      double l = 0.0;
      for (size_t i = 0; i < out.size(); ++i) l += g[i] * out[i];
      return l;
    };
    std::vector<double> dx(B * S * C), dw(C * W, 0.0), db(C, 0.0);
    ref::causal_conv1d_silu_backward_generic<double>(dx.data(), C, dw.data(), db.data(), g.data(), x.data(), C,
                                                     w.data(), b.data(), B, S, C);
    for (size_t i = 0; i < x.size(); ++i) {
      auto xp = x, xm = x;
      xp[i] += 1e-6;
      xm[i] -= 1e-6;
      const double fd = (loss(xp) - loss(xm)) / 2e-6;
      EXPECT_NEAR(dx[i], fd, 1e-7 * (1.0 + std::fabs(fd))) << "S=" << S << " i=" << i;
    }
    // Weight taps that only ever see the padding (k < 3 - (S - 1)) get no gradient.
    for (int64_t c = 0; c < C; ++c)
      for (int64_t k = 0; k < W - S; ++k) EXPECT_EQ(dw[c * W + k], 0.0) << "S=" << S << " c=" << c << " k=" << k;
  }
}

TEST(CausalConv1dReference, Fp32MatchesFp64) {
  const int64_t B = 3, S = 37, C = 20, stride = 24;
  const auto x = test::random_normal(B * S * stride, 61);
  const auto w = test::random_normal(C * W, 62, 0.5f);
  const auto b = test::random_normal(C, 63);
  const auto g = test::random_normal(B * S * C, 64);
  std::vector<float> out(B * S * C), dx(B * S * stride), dw(C * W, 0.0f), db(C, 0.0f);
  ref::causal_conv1d_silu_forward(out.data(), x.data(), stride, w.data(), b.data(), B, S, C);
  ref::causal_conv1d_silu_backward(dx.data(), stride, dw.data(), db.data(), g.data(), x.data(), stride, w.data(),
                                   b.data(), B, S, C);
  const auto xd = to_double(x), wd = to_double(w), bd = to_double(b), gd = to_double(g);
  std::vector<double> outd(B * S * C), dxd(B * S * stride), dwd(C * W, 0.0), dbd(C, 0.0);
  ref::causal_conv1d_silu_forward_generic<double>(outd.data(), xd.data(), stride, wd.data(), bd.data(), B, S, C);
  ref::causal_conv1d_silu_backward_generic<double>(dxd.data(), stride, dwd.data(), dbd.data(), gd.data(), xd.data(),
                                                   stride, wd.data(), bd.data(), B, S, C);
  auto as_float = [](const std::vector<double>& v) { return std::vector<float>(v.begin(), v.end()); };
  // Compare only the C columns of the strided din.
  std::vector<float> dx_cols, dxd_cols;
  for (int64_t r = 0; r < B * S; ++r)
    for (int64_t c = 0; c < C; ++c) {
      dx_cols.push_back(dx[r * stride + c]);
      dxd_cols.push_back(static_cast<float>(dxd[r * stride + c]));
    }
  EXPECT_LT(test::relative_error(out, as_float(outd)), 1e-6);
  EXPECT_LT(test::relative_error(dx_cols, dxd_cols), 1e-6);
  EXPECT_LT(test::relative_error(dw, as_float(dwd)), 1e-6);
  EXPECT_LT(test::relative_error(db, as_float(dbd)), 1e-6);
}

// Decoding's continued conv: one sequence fed in pieces (a prompt, single tokens, a chunk), each from the
// state the last one left, gives the whole conv's output; the state is left holding the last 3 inputs
// (fewer inputs than 3 so far: zeros before them).
TEST(CausalConv1dReference, ContinuedInPiecesEqualsTheWholeConv) {
  const int64_t S = 9, C = 5, stride = 7;
  std::vector<float> in = test::random_normal(S * stride, 71);
  const auto w = test::random_normal(C * W, 72);
  const auto b = test::random_normal(C, 73);
  std::vector<float> want(S * C), out(S * C, std::nanf("")), state(C * (W - 1), 0.0f);
  ref::causal_conv1d_silu_forward(want.data(), in.data(), stride, w.data(), b.data(), 1, S, C);
  ref::causal_conv1d_silu_forward_continued(out.data(), state.data(), in.data(), stride, w.data(), b.data(), 1, C);
  for (int64_t c = 0; c < C; ++c) {
    EXPECT_EQ(state[c * (W - 1) + 0], 0.0f);
    EXPECT_EQ(state[c * (W - 1) + 1], 0.0f);
    EXPECT_EQ(state[c * (W - 1) + 2], in[c]);
  }
  for (const auto& [t0, n] : std::vector<std::pair<int64_t, int64_t>>{{1, 1}, {2, 4}, {6, 1}, {7, 2}}) {
    ref::causal_conv1d_silu_forward_continued(out.data() + t0 * C, state.data(), in.data() + t0 * stride, stride,
                                              w.data(), b.data(), n, C);
  }
  EXPECT_EQ(out, want);
  for (int64_t c = 0; c < C; ++c) {
    for (int64_t j = 0; j < W - 1; ++j) EXPECT_EQ(state[c * (W - 1) + j], in[(S - (W - 1) + j) * stride + c]);
  }
}

}  // namespace
}  // namespace sg
