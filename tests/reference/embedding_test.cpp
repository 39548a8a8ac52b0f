// Embedding reference: forward gathers rows; backward scatters-adds (repeated tokens accumulate) and
// matches finite differences of L = sum(G * embedding(table)) in fp64.
#include "reference/embedding.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "test_util.h"

namespace sg {
namespace {

TEST(EmbeddingReference, ForwardGathersRows) {
  const int64_t V = 6, H = 3;
  const std::vector<int32_t> tokens = {5, 0, 5, 2};
  const auto table = test::random_normal(V * H, 81);
  std::vector<float> out(tokens.size() * H);
  ref::embedding_forward(out.data(), tokens.data(), table.data(), 4, H);
  for (size_t t = 0; t < tokens.size(); ++t)
    for (int64_t h = 0; h < H; ++h) EXPECT_EQ(out[t * H + h], table[tokens[t] * H + h]);
}

TEST(EmbeddingReference, BackwardAddsRepeatedTokens) {
  const int64_t H = 2;
  const std::vector<int32_t> tokens = {1, 3, 1};
  const std::vector<float> dout = {1, 2, 10, 20, 100, 200};
  std::vector<float> dtable(4 * H, 0.5f);
  ref::embedding_backward(dtable.data(), dout.data(), tokens.data(), 3, H);
  EXPECT_EQ(dtable, (std::vector<float>{0.5f, 0.5f, 101.5f, 202.5f, 0.5f, 0.5f, 10.5f, 20.5f}));
}

TEST(EmbeddingReference, BackwardMatchesFiniteDifferences) {
  const int64_t V = 5, H = 4, T = 9;
  const auto tokens = test::random_tokens(T, V, 91);
  const auto table = test::random_normal(V * H, 92);
  const auto g = test::random_normal(T * H, 93);
  auto loss = [&](const std::vector<float>& tab) {
    std::vector<float> out(T * H);
    ref::embedding_forward(out.data(), tokens.data(), tab.data(), T, H);
    double l = 0.0;
    for (size_t i = 0; i < out.size(); ++i) l += double(g[i]) * out[i];
    return l;
  };
  std::vector<float> dtable(V * H, 0.0f);
  ref::embedding_backward(dtable.data(), g.data(), tokens.data(), T, H);
  // The loss is linear in the table, so a unit step is exact up to fp32 rounding of the sums.
  for (int64_t i = 0; i < V * H; ++i) {
    auto p = table, m = table;
    p[i] += 1.0f;
    m[i] -= 1.0f;
    const double fd = (loss(p) - loss(m)) / 2.0;
    EXPECT_NEAR(dtable[i], fd, 1e-5 * (1.0 + std::fabs(fd))) << "dtable[" << i << "]";
  }
}

}  // namespace
}  // namespace sg
