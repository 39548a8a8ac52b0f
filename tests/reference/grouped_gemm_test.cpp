// CPU twin of the grouped GEMMs (reference/grouped_gemm.h) against a naive per-element loop written
// independently (row -> its expert, dot products in double): zero-row experts, all rows on one expert,
// skewed counts, gaps between segments (untouched rows), wgrad accumulation and overwrite (accumulate =
// false: dW's old contents, NaN here, are never read; zero-row experts get dW = 0), malformed segments.
#include "reference/grouped_gemm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "core/error.h"
#include "test_util.h"

namespace sg {
namespace {

struct Case {
  const char* name;
  int64_t N, K;
  std::vector<int32_t> counts, offsets;
  int64_t total_rows;
};

// Counts laid out back to back from row `first`, with `gap` unused rows after each segment.
Case packed(const char* name, int64_t N, int64_t K, std::vector<int32_t> counts, int32_t gap = 0) {
  Case c{name, N, K, std::move(counts), {}, 0};
  int32_t row = 0;
  for (int32_t n : c.counts) {
    c.offsets.push_back(row);
    row += n + gap;
  }
  c.total_rows = row;
  return c;
}

// The expert owning row r, or -1.
int expert_of(const Case& c, int64_t r) {
  for (size_t g = 0; g < c.counts.size(); ++g)
    if (r >= c.offsets[g] && r < c.offsets[g] + c.counts[g]) return static_cast<int>(g);
  return -1;
}

ref::GroupedRows rows_of(const Case& c) {
  return {c.counts.data(), c.offsets.data(), static_cast<int>(c.counts.size()), c.total_rows};
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

class ReferenceGroupedGemm : public ::testing::TestWithParam<Case> {};

TEST_P(ReferenceGroupedGemm, MatchesNaiveLoops) {
  const Case& c = GetParam();
  const int64_t G = static_cast<int64_t>(c.counts.size()), T = c.total_rows, N = c.N, K = c.K;
  const auto x = test::random_normal(T * K, 1);
  const auto dy = test::random_normal(T * N, 2);
  const auto w = test::random_normal(G * N * K, 3);
  const auto dw0 = test::random_normal(G * N * K, 4);
  const float kUntouched = -7.0f;

  std::vector<float> y(T * N, kUntouched), dx(T * K, kUntouched), dw = dw0;
  ref::grouped_linear_forward(y.data(), x.data(), w.data(), rows_of(c), N, K);
  ref::grouped_linear_backward_input(dx.data(), dy.data(), w.data(), rows_of(c), N, K);
  ref::grouped_linear_backward_weight(dw.data(), dy.data(), x.data(), rows_of(c), N, K);

  std::vector<float> y_naive(T * N, kUntouched), dx_naive(T * K, kUntouched);
  std::vector<double> dw_acc(G * N * K, 0.0);
  for (int64_t r = 0; r < T; ++r) {
    const int g = expert_of(c, r);
    if (g < 0) continue;
    const float* wg = w.data() + g * N * K;
    for (int64_t n = 0; n < N; ++n) {
      double acc = 0.0;
      for (int64_t k = 0; k < K; ++k) acc += double(x[r * K + k]) * wg[n * K + k];
      y_naive[r * N + n] = static_cast<float>(acc);
    }
    for (int64_t k = 0; k < K; ++k) {
      double acc = 0.0;
      for (int64_t n = 0; n < N; ++n) acc += double(dy[r * N + n]) * wg[n * K + k];
      dx_naive[r * K + k] = static_cast<float>(acc);
    }
    for (int64_t n = 0; n < N; ++n)
      for (int64_t k = 0; k < K; ++k) dw_acc[(g * N + n) * K + k] += double(dy[r * N + n]) * x[r * K + k];
  }
  std::vector<float> dw_naive(G * N * K), dw_overwrite_naive(G * N * K);
  for (int64_t i = 0; i < G * N * K; ++i) {
    dw_naive[i] = static_cast<float>(dw0[i] + dw_acc[i]);
    dw_overwrite_naive[i] = static_cast<float>(dw_acc[i]);
  }
  // Overwrite from NaN: every element is written (NaN anywhere makes relative_error infinite).
  std::vector<float> dw_overwrite(G * N * K, std::numeric_limits<float>::quiet_NaN());
  ref::grouped_linear_backward_weight(dw_overwrite.data(), dy.data(), x.data(), rows_of(c), N, K,
                                      /*accumulate=*/false);
  EXPECT_LT(test::relative_error(dw_overwrite, dw_overwrite_naive), 1e-6);

  EXPECT_LT(test::relative_error(y, y_naive), 1e-6);
  EXPECT_LT(test::relative_error(dx, dx_naive), 1e-6);
  EXPECT_LT(test::relative_error(dw, dw_naive), 1e-6);
  for (int64_t r = 0; r < T; ++r) {
    if (expert_of(c, r) >= 0) continue;  // rows in no segment keep their value exactly
    for (int64_t n = 0; n < N; ++n) ASSERT_EQ(y[r * N + n], kUntouched) << "row " << r;
    for (int64_t k = 0; k < K; ++k) ASSERT_EQ(dx[r * K + k], kUntouched) << "row " << r;
  }
  for (int64_t g = 0; g < G; ++g) {
    if (c.counts[g] != 0) continue;  // zero-row experts leave dW bit-for-bit unchanged, or zero it
    const std::vector<float> got(dw.begin() + g * N * K, dw.begin() + (g + 1) * N * K);
    const std::vector<float> want(dw0.begin() + g * N * K, dw0.begin() + (g + 1) * N * K);
    EXPECT_TRUE(same_bits(got, want)) << "expert " << g;
    const std::vector<float> overwritten(dw_overwrite.begin() + g * N * K, dw_overwrite.begin() + (g + 1) * N * K);
    EXPECT_TRUE(same_bits(overwritten, std::vector<float>(N * K, 0.0f))) << "overwritten expert " << g;
  }
  // Overwrite then accumulate (first and second microbatch) = accumulating twice from zero, bit for bit:
  // both add the same per-expert products onto the same values in the same order.
  std::vector<float> twice(G * N * K, 0.0f);
  ref::grouped_linear_backward_weight(twice.data(), dy.data(), x.data(), rows_of(c), N, K);
  ref::grouped_linear_backward_weight(twice.data(), dy.data(), x.data(), rows_of(c), N, K);
  ref::grouped_linear_backward_weight(dw_overwrite.data(), dy.data(), x.data(), rows_of(c), N, K);
  EXPECT_TRUE(same_bits(dw_overwrite, twice));
}

INSTANTIATE_TEST_SUITE_P(
    Routings, ReferenceGroupedGemm,
    ::testing::Values(packed("one_expert", 8, 16, {5}), packed("balanced", 16, 8, {3, 3, 3, 3}),
                      packed("zero_experts", 24, 16, {0, 4, 0, 7, 0}), packed("all_on_one", 8, 24, {0, 0, 9, 0}),
                      packed("skewed_odd", 16, 40, {1, 13, 2, 0, 5}), packed("gaps", 8, 16, {2, 0, 3}, /*gap=*/2)),
    [](const auto& info) { return std::string(info.param.name); });

TEST(ReferenceGroupedGemmErrors, SegmentOutsideTheBufferThrowsBeforeWriting) {
  const int64_t N = 8, K = 8, T = 4;
  const std::vector<int32_t> counts = {2, 3}, offsets = {0, 2};  // second segment ends at row 5 > 4
  const ref::GroupedRows rows{counts.data(), offsets.data(), 2, T};
  const auto x = test::random_normal(T * K, 5);
  const auto w = test::random_normal(2 * N * K, 6);
  std::vector<float> y(T * N, 1.0f);
  const std::string message =
      test::thrown_message([&] { ref::grouped_linear_forward(y.data(), x.data(), w.data(), rows, N, K); });
  EXPECT_NE(message.find("expert 1's segment [2, 5)"), std::string::npos) << message;
  for (float v : y) EXPECT_EQ(v, 1.0f);
  const std::vector<int32_t> negative = {-1, 0};
  const ref::GroupedRows bad{negative.data(), offsets.data(), 2, T};
  std::vector<float> dw(2 * N * K, 0.0f);
  EXPECT_THROW(ref::grouped_linear_backward_weight(dw.data(), y.data(), x.data(), bad, N, K), Error);
  // Overwrite checks the segments before zeroing anything: a bad one leaves dW untouched.
  std::vector<float> kept(2 * N * K, 3.0f);
  EXPECT_THROW(ref::grouped_linear_backward_weight(kept.data(), y.data(), x.data(), bad, N, K, /*accumulate=*/false),
               Error);
  for (float v : kept) ASSERT_EQ(v, 3.0f);
}

}  // namespace
}  // namespace sg
