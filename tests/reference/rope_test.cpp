// RoPE reference: the HF rotate-half convention on a hand-computed case, backward = inverse and against
// fp64 finite differences, strided heads leave the rest of the row untouched, Llama 3 and LongRoPE scaling.
#include "reference/rope.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/error.h"
#include "test_util.h"

namespace sg {
namespace {

TEST(RopeReference, RotateHalfConventionKnownValues) {
  // head_dim 4, base 100: freq_0 = 1, freq_1 = 100^(-1/2) = 0.1. Row t=3 with S=2 is position 1.
  const int64_t T = 4, S = 2, d = 4;
  std::vector<float> x(T * d, 0.0f);
  for (int64_t t = 0; t < T; ++t) {
    x[t * d + 0] = 1.0f;  // x1 of pair 0
    x[t * d + 3] = 2.0f;  // x2 of pair 1
  }
  ref::rope_forward(x.data(), T, S, 1, d, d, 100.0);
  // Position 0 (rows 0, 2): identity.
  for (int64_t i = 0; i < d; ++i) EXPECT_EQ(x[2 * d + i], (i == 0 ? 1.0f : i == 3 ? 2.0f : 0.0f));
  // Position 1 (row 3): out[i] = x1 cos - x2 sin, out[i+2] = x2 cos + x1 sin.
  const float* r = x.data() + 3 * d;
  EXPECT_NEAR(r[0], std::cos(1.0), 1e-6);
  EXPECT_NEAR(r[2], std::sin(1.0), 1e-6);
  EXPECT_NEAR(r[1], -2.0 * std::sin(0.1), 1e-6);
  EXPECT_NEAR(r[3], 2.0 * std::cos(0.1), 1e-6);
}

TEST(RopeReference, BackwardInvertsForwardAndStridedHeadsStayInPlace) {
  // A fused QKV-like row: 3 q heads, 1 k head, 1 v head of 8; rotate q and k (4 heads), not v.
  const int64_t T = 37, S = 16, d = 8, heads = 4, stride = 5 * d;
  const auto x0 = test::random_normal(T * stride, 61);
  auto x = x0;
  ref::rope_forward(x.data(), T, S, heads, d, stride, 10000.0);
  double moved = 0.0;
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t j = 0; j < stride; ++j) {
      const int64_t i = t * stride + j;
      if (j >= heads * d) {
        EXPECT_EQ(x[i], x0[i]) << "v head must not be touched";
      }
      moved += std::fabs(x[i] - x0[i]);
    }
    // A rotation keeps each pair's norm.
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < d / 2; ++i) {
        const int64_t a = t * stride + h * d + i, b = a + d / 2;
        EXPECT_NEAR(x[a] * x[a] + x[b] * x[b], x0[a] * x0[a] + x0[b] * x0[b], 1e-4);
      }
  }
  EXPECT_GT(moved, 1.0);
  ref::rope_backward(x.data(), T, S, heads, d, stride, 10000.0);
  EXPECT_LT(test::relative_error(x, x0), 1e-6);
}

// rope_backward_generic<double> against central finite differences of <g, rope_forward_generic(x)>, per element of x.
void expect_backward_matches_finite_differences(int64_t T, int64_t S, int64_t d, int64_t heads, int64_t stride,
                                                const ref::RopeScaling& scaling, int64_t rotary_dim, uint64_t seed) {
  const auto xf = test::random_normal(T * stride, seed);
  const auto gf = test::random_normal(T * stride, seed + 1);
  const std::vector<double> x(xf.begin(), xf.end()), g(gf.begin(), gf.end());
  auto loss = [&](std::vector<double> v) {
    ref::rope_forward_generic<double>(v.data(), T, S, heads, d, stride, 500.0, scaling, nullptr, rotary_dim);
    double l = 0.0;
    for (size_t i = 0; i < v.size(); ++i) l += g[i] * v[i];
    return l;
  };
  auto dx = g;
  ref::rope_backward_generic<double>(dx.data(), T, S, heads, d, stride, 500.0, scaling, nullptr, rotary_dim);
  const double step = 1e-5;
  for (size_t i = 0; i < x.size(); ++i) {
    auto p = x, m = x;
    p[i] += step;
    m[i] -= step;
    const double fd = (loss(p) - loss(m)) / (2 * step);
    EXPECT_NEAR(dx[i], fd, 1e-8 * (1.0 + std::fabs(fd))) << "rotary_dim " << rotary_dim << " dx[" << i << "]";
  }
}

TEST(RopeReference, BackwardMatchesFiniteDifferencesFp64) {
  for (const int64_t rotary_dim : {0, 4}) {  // the whole head, and partial rotary
    expect_backward_matches_finite_differences(5, 3, 6, 2, 13, {}, rotary_dim, 71);
  }
}

// Partial rotary (HF Phi3's q_rot / q_pass): the first rotary_dim dimensions of each head rotate exactly as a head
// of rotary_dim would (its frequencies base^(-2i/rotary_dim), pairs (i, i + rotary_dim/2)); the rest, and the
// dimensions after the rotated heads, come back as they were.
TEST(RopeReference, PartialRotaryRotatesTheFirstDimensionsAsAHeadOfThatSize) {
  const int64_t T = 9, S = 5, d = 10, rotary_dim = 4, heads = 3, stride = heads * d + 7;
  const auto x0 = test::random_normal(T * stride, 91);
  auto x = x0;
  ref::rope_forward(x.data(), T, S, heads, d, stride, 10000.0, {}, nullptr, rotary_dim);
  for (int64_t t = 0; t < T; ++t) {
    const int32_t position = static_cast<int32_t>(t % S);
    for (int64_t h = 0; h < heads; ++h) {
      const int64_t head = t * stride + h * d;
      std::vector<float> alone(x0.begin() + head, x0.begin() + head + rotary_dim);
      ref::rope_forward(alone.data(), 1, 1, 1, rotary_dim, rotary_dim, 10000.0, {}, &position);
      for (int64_t j = 0; j < rotary_dim; ++j) EXPECT_EQ(x[head + j], alone[j]) << "t " << t << " h " << h << " " << j;
      for (int64_t j = rotary_dim; j < d; ++j) EXPECT_EQ(x[head + j], x0[head + j]) << "passed through: " << j;
    }
    for (int64_t j = heads * d; j < stride; ++j) EXPECT_EQ(x[t * stride + j], x0[t * stride + j]);
  }
  EXPECT_GT(test::relative_error(x, x0), 1e-2) << "the rotated dimensions moved";
  ref::rope_backward(x.data(), T, S, heads, d, stride, 10000.0, {}, nullptr, rotary_dim);
  EXPECT_LT(test::relative_error(x, x0), 1e-6);
  // The cos/sin table of the rotated dimensions is the table of a head of that size.
  std::vector<float> table(static_cast<size_t>(S * rotary_dim));
  ref::rope_cos_sin_table(table.data(), S, rotary_dim, 10000.0);
  EXPECT_FLOAT_EQ(table[1 * rotary_dim + 1], static_cast<float>(std::cos(1.0 * std::pow(10000.0, -2.0 / 4.0))));
}

TEST(RopeReference, RejectsARotaryDimThatIsOddOrWiderThanTheHead) {
  std::vector<float> x(2 * 8);
  for (const int64_t rotary_dim : {int64_t{-2}, int64_t{3}, int64_t{10}}) {
    const std::string message =
        test::thrown_message([&] { ref::rope_forward(x.data(), 2, 2, 1, 8, 8, 10000.0, {}, nullptr, rotary_dim); });
    EXPECT_NE(message.find("rotary_dim"), std::string::npos) << rotary_dim << ": " << message;
  }
}

TEST(RopeReference, ExplicitPositionsEqualModuloPositions) {
  // Rows at t % S, or the same positions given explicitly (what decoding passes): bitwise equal.
  const int64_t T = 11, S = 4, d = 8, heads = 3;
  const auto x = test::random_normal(T * heads * d, 81);
  auto by_modulo = x, by_positions = x;
  std::vector<int32_t> positions(T);
  for (int64_t t = 0; t < T; ++t) positions[t] = static_cast<int32_t>(t % S);
  ref::rope_forward(by_modulo.data(), T, S, heads, d, heads * d, 10000.0);
  ref::rope_forward(by_positions.data(), T, 1, heads, d, heads * d, 10000.0, {}, positions.data());
  EXPECT_EQ(by_modulo, by_positions);
  ref::rope_backward(by_positions.data(), T, 1, heads, d, heads * d, 10000.0, {}, positions.data());
  EXPECT_LT(test::relative_error(by_positions, x), 1e-6);
}

TEST(RopeReference, Llama3ScalingFrequencies) {
  // head_dim 8, base 10000: unscaled inverse frequencies 1, 0.1, 0.01, 0.001, wavelengths 2 pi / f.
  // factor 8, low_freq_factor 1, high_freq_factor 4, original context 64: wavelengths below 64/4 = 16
  // keep their frequency (pair 0), above 64/1 = 64 are divided by 8 (pairs 2, 3), between them (pair 1,
  // wavelength 62.8) interpolate with s = (64 / wavelength - 1) / (4 - 1).
  ref::RopeScaling scaling;
  scaling.factor = 8.0;
  scaling.low_freq_factor = 1.0;
  scaling.high_freq_factor = 4.0;
  scaling.original_max_position_embeddings = 64.0;
  const double two_pi = 2.0 * M_PI;
  const double s = (64.0 / (two_pi / 0.1) - 1.0) / 3.0;
  const double want[4] = {1.0, (1.0 - s) * 0.1 / 8.0 + s * 0.1, 0.01 / 8.0, 0.001 / 8.0};
  for (int64_t i = 0; i < 4; ++i) {
    EXPECT_NEAR(ref::rope_inv_freq(i, 8, 10000.0, scaling), want[i], 1e-15) << "pair " << i;
    EXPECT_NEAR(ref::rope_inv_freq(i, 8, 10000.0, {}), std::pow(10000.0, -2.0 * i / 8.0), 1e-15);
  }
  // The rotation uses them: pair 2 of a row at position 5 turns by 5 * 0.01 / 8.
  std::vector<float> x(8, 0.0f);
  x[2] = 1.0f;
  const int32_t pos = 5;
  ref::rope_forward(x.data(), 1, 1, 1, 8, 8, 10000.0, scaling, &pos);
  EXPECT_NEAR(x[2], std::cos(5 * 0.01 / 8.0), 1e-7);
  EXPECT_NEAR(x[6], std::sin(5 * 0.01 / 8.0), 1e-7);
  scaling.high_freq_factor = 0.5;  // not above low_freq_factor
  EXPECT_THROW(ref::rope_forward(x.data(), 1, 1, 1, 8, 8, 10000.0, scaling, &pos), Error);
}

// A LongRoPE scaling of `pairs` factors 1, 2, 3, ... and attention factor a.
ref::RopeScaling longrope_scaling(int pairs, double attention_factor) {
  ref::RopeScaling s;
  s.longrope_pairs = pairs;
  for (int i = 0; i < pairs; ++i) s.longrope_factors[i] = static_cast<float>(i + 1);
  s.attention_factor = attention_factor;
  return s;
}

// Phi-3's LongRoPE as transformers computes it: inv_freq_i = 1 / (f_i base^(2i/d)), and cos and sin times the
// attention factor, so a pair's norm grows by it; the backward is the transposed (scaled) rotation.
TEST(RopeReference, LongRopeDividesEachPairsFrequencyAndScalesCosAndSin) {
  const ref::RopeScaling scaling = longrope_scaling(4, 1.25);
  for (int64_t i = 0; i < 4; ++i) {
    EXPECT_NEAR(ref::rope_inv_freq(i, 8, 10000.0, scaling), 1.0 / ((i + 1) * std::pow(10000.0, 2.0 * i / 8.0)), 1e-16)
        << "pair " << i;
  }
  // Pair 1 of a row at position 7 turns by 7 * 0.1 / 2, scaled by 1.25.
  std::vector<float> x(8, 0.0f);
  x[1] = 1.0f;
  const int32_t pos = 7;
  ref::rope_forward(x.data(), 1, 1, 1, 8, 8, 10000.0, scaling, &pos);
  EXPECT_NEAR(x[1], 1.25 * std::cos(7 * 0.1 / 2.0), 1e-6);
  EXPECT_NEAR(x[5], 1.25 * std::sin(7 * 0.1 / 2.0), 1e-6);
  // The table holds the scaled values; with partial rotary the factors are the rotated pairs'.
  std::vector<float> table(3 * 8);
  ref::rope_cos_sin_table(table.data(), 3, 8, 10000.0, scaling);
  EXPECT_EQ(table[2 * 8 + 1], static_cast<float>(std::cos(2 * ref::rope_inv_freq(1, 8, 10000.0, scaling)) * 1.25));
  EXPECT_EQ(table[2 * 8 + 4 + 1], static_cast<float>(std::sin(2 * ref::rope_inv_freq(1, 8, 10000.0, scaling)) * 1.25));
  expect_backward_matches_finite_differences(6, 3, 12, 2, 27, scaling, 8, 73);
}

TEST(RopeReference, RejectsLongRopeFactorsThatDoNotFitTheRotatedPairs) {
  std::vector<float> x(2 * 8);
  const auto message = [&](const ref::RopeScaling& s, int64_t rotary_dim) {
    return test::thrown_message([&] { ref::rope_forward(x.data(), 2, 2, 1, 8, 8, 10000.0, s, nullptr, rotary_dim); });
  };
  EXPECT_NE(message(longrope_scaling(4, 1.0), 4).find("LongRoPE has 4 factors but 4 dimensions"), std::string::npos);
  EXPECT_NO_THROW(ref::rope_forward(x.data(), 2, 2, 1, 8, 8, 10000.0, longrope_scaling(2, 1.0), nullptr, 4));
  auto zero = longrope_scaling(4, 1.0);
  zero.longrope_factors[3] = 0.0f;
  EXPECT_NE(message(zero, 0).find("positive finite factors"), std::string::npos);
  auto both = longrope_scaling(4, 1.0);
  both.factor = 8.0;  // Llama 3 as well
  EXPECT_NE(message(both, 0).find("not Llama 3 too"), std::string::npos);
  EXPECT_NE(message(longrope_scaling(4, -1.0), 0).find("attention_factor (-1)"), std::string::npos);
}

TEST(RopeReference, RejectsOddHeadDim) {
  std::vector<float> x(10);
  EXPECT_THROW(ref::rope_forward(x.data(), 2, 2, 1, 5, 5, 10000.0), Error);
  std::vector<float> table(20);
  EXPECT_THROW(ref::rope_cos_sin_table(table.data(), 2, 5, 10000.0), Error);
  EXPECT_THROW(ref::rope_cos_sin_table(table.data(), 0, 4, 10000.0), Error);
}

// The cos/sin table: per position its cos row, then its sin row; head_dim 4, base 100: freq 1 and 0.1.
// A one-head rotation of e_i (x[i] = 1) reads back exactly the table's (cos, sin) of pair i.
TEST(RopeReference, CosSinTableLayoutAndValues) {
  const int64_t P = 5, d = 4;
  std::vector<float> table(P * d, NAN);
  ref::rope_cos_sin_table(table.data(), P, d, 100.0);
  for (int64_t pos = 0; pos < P; ++pos) {
    const float* row = table.data() + pos * d;
    const double f1 = ref::rope_inv_freq(1, d, 100.0, {});  // 0.1 up to pow's rounding
    EXPECT_EQ(row[0], static_cast<float>(std::cos(pos * 1.0))) << pos;
    EXPECT_EQ(row[1], static_cast<float>(std::cos(pos * f1))) << pos;
    EXPECT_EQ(row[2], static_cast<float>(std::sin(pos * 1.0))) << pos;
    EXPECT_EQ(row[3], static_cast<float>(std::sin(pos * f1))) << pos;
    EXPECT_NEAR(row[1], std::cos(pos * 0.1), 1e-7) << pos;
    for (int64_t i = 0; i < d / 2; ++i) {
      std::vector<float> x(d, 0.0f);
      x[i] = 1.0f;
      const int32_t position = static_cast<int32_t>(pos);
      ref::rope_forward(x.data(), 1, 1, 1, d, d, 100.0, {}, &position);
      EXPECT_EQ(x[i], row[i]) << "cos, position " << pos << " pair " << i;
      EXPECT_EQ(x[i + d / 2], row[d / 2 + i]) << "sin, position " << pos << " pair " << i;
    }
  }
  // Llama 3 scaling reaches the table (the low frequency is divided by the factor).
  ref::RopeScaling scaling;
  scaling.factor = 8.0;
  scaling.original_max_position_embeddings = 4.0;
  std::vector<float> scaled(P * d);
  ref::rope_cos_sin_table(scaled.data(), P, d, 100.0, scaling);
  EXPECT_EQ(scaled[4 * d + 1], static_cast<float>(std::cos(4 * ref::rope_inv_freq(1, d, 100.0, scaling))));
  EXPECT_NEAR(scaled[4 * d + 1], std::cos(4 * 0.1 / 8.0), 1e-7);
  EXPECT_NE(scaled[4 * d + 1], table[4 * d + 1]);
}

}  // namespace
}  // namespace sg
