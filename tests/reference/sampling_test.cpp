// Sampling twin: greedy is the argmax with the lowest id on ties and NaN ignored; top-k and top-p
// keep exactly the tokens their definitions name (hand-computed cases); temperature reshapes the
// distribution as softmax(l / T); the draws follow Philox (same seed and step: same tokens) and their
// frequencies match the distribution; invalid options are refused naming the flag.
#include "reference/sampling.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <vector>

#include "core/error.h"
#include "core/philox.h"
#include "test_util.h"

namespace sg {
namespace {

ref::SamplingConfig sampling(float temperature, int64_t top_k = 0, float top_p = 1.0f, uint64_t seed = 5) {
  return {.temperature = temperature, .top_k = top_k, .top_p = top_p, .seed = seed};
}

TEST(SamplingReference, GreedyIsArgmaxLowestIdOnTiesNanIgnored) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const std::vector<float> logits = {0.5f, 2.0f, nan, 2.0f, -1.0f};
  EXPECT_EQ(ref::sample_token(logits.data(), 5, sampling(0.0f), 0.3f), 1);
  const std::vector<float> all_low = {-INFINITY, nan, -INFINITY};
  EXPECT_EQ(ref::sample_token(all_low.data(), 3, sampling(0.0f), 0.3f), 0);
  // top_k = 1 samples the argmax whatever the draw.
  for (float u : {0.0f, 0.5f, 0.999f}) EXPECT_EQ(ref::sample_token(logits.data(), 2, sampling(1.0f, 1), u), 1);
}

TEST(SamplingReference, TopKTopPAndTemperatureKeepWhatTheyName) {
  // logits ln(4), ln(3), ln(2), ln(1): probabilities 0.4, 0.3, 0.2, 0.1 at T = 1.
  const std::vector<float> logits = {std::log(2.0f), std::log(4.0f), std::log(1.0f), std::log(3.0f)};
  auto dist = ref::sampling_distribution(logits.data(), 4, sampling(1.0f));
  EXPECT_EQ(dist.tokens, (std::vector<int32_t>{1, 3, 0, 2}));
  EXPECT_NEAR(dist.probs[0], 0.4, 1e-6);
  EXPECT_NEAR(dist.probs[3], 0.1, 1e-6);
  dist = ref::sampling_distribution(logits.data(), 4, sampling(1.0f, 2));  // top-2, renormalised
  EXPECT_EQ(dist.tokens, (std::vector<int32_t>{1, 3}));
  EXPECT_NEAR(dist.probs[0], 4.0 / 7.0, 1e-6);
  // top-p: token 3 has 0.4 of the mass before it (kept below 0.69), token 0 has 0.7 (cut at 0.69, kept at 0.71).
  dist = ref::sampling_distribution(logits.data(), 4, sampling(1.0f, 0, 0.69f));
  EXPECT_EQ(dist.tokens, (std::vector<int32_t>{1, 3}));
  dist = ref::sampling_distribution(logits.data(), 4, sampling(1.0f, 0, 0.71f));
  EXPECT_EQ(dist.tokens, (std::vector<int32_t>{1, 3, 0}));
  dist = ref::sampling_distribution(logits.data(), 4, sampling(1.0f, 0, 0.01f));  // at least one token
  EXPECT_EQ(dist.tokens, (std::vector<int32_t>{1}));
  // top-k then top-p on the renormalised top-3 mass (4:3:2): before token 3 4/9 < 0.6 (kept), before
  // token 0 7/9 (cut).
  dist = ref::sampling_distribution(logits.data(), 4, sampling(1.0f, 3, 0.6f));
  EXPECT_EQ(dist.tokens, (std::vector<int32_t>{1, 3}));
  // Temperature 0.5 squares the odds: 16:9:4:1.
  dist = ref::sampling_distribution(logits.data(), 4, sampling(0.5f));
  EXPECT_NEAR(dist.probs[0], 16.0 / 30.0, 1e-6);
  EXPECT_NEAR(dist.probs[1], 9.0 / 30.0, 1e-6);
  // The draw takes the first token whose cumulative probability exceeds u.
  const auto c = sampling(1.0f);
  EXPECT_EQ(ref::sample_token(logits.data(), 4, c, 0.0f), 1);
  EXPECT_EQ(ref::sample_token(logits.data(), 4, c, 0.39f), 1);
  EXPECT_EQ(ref::sample_token(logits.data(), 4, c, 0.41f), 3);
  EXPECT_EQ(ref::sample_token(logits.data(), 4, c, 0.95f), 2);
}

TEST(SamplingReference, DrawsFollowPhiloxAndTheDistribution) {
  const int64_t B = 4000, V = 6;
  const std::vector<float> row = {1.0f, 0.0f, 2.0f, -1.0f, 0.5f, 1.5f};
  std::vector<float> logits;
  for (int64_t b = 0; b < B; ++b) logits.insert(logits.end(), row.begin(), row.end());
  std::vector<int32_t> a(B), again(B), other_step(B);
  const auto c = sampling(0.8f, 5, 0.95f, 11);
  ref::sample_tokens(a.data(), logits.data(), B, V, V, c, 3);
  ref::sample_tokens(again.data(), logits.data(), B, V, V, c, 3);
  ref::sample_tokens(other_step.data(), logits.data(), B, V, V, c, 4);
  EXPECT_EQ(a, again);
  EXPECT_NE(a, other_step);
  // Row b's draw is philox_uniform(seed, step, kSamplingSite, b).
  for (int64_t b = 0; b < 20; ++b) {
    const float u = rng::philox_uniform(11, 3, ref::kSamplingSite, static_cast<uint64_t>(b));
    EXPECT_EQ(a[b], ref::sample_token(row.data(), V, c, u));
  }
  const auto dist = ref::sampling_distribution(row.data(), V, c);
  std::map<int32_t, int> counts;
  for (int32_t t : a) ++counts[t];
  for (size_t j = 0; j < dist.tokens.size(); ++j) {
    const double p = dist.probs[j], sd = std::sqrt(p * (1 - p) / B);
    EXPECT_NEAR(counts[dist.tokens[j]] / double(B), p, 5 * sd) << "token " << dist.tokens[j];
  }
  EXPECT_EQ(counts.count(3), 0u) << "token 3 is outside the top-5";
}

TEST(SamplingReference, RefusesBadOptions) {
  EXPECT_NE(test::thrown_message([] { ref::check_sampling_config(sampling(-1.0f)); }).find("--temperature"),
            std::string::npos);
  EXPECT_NE(test::thrown_message([] { ref::check_sampling_config(sampling(1.0f, -2)); }).find("--top-k"),
            std::string::npos);
  EXPECT_NE(test::thrown_message([] { ref::check_sampling_config(sampling(1.0f, 0, 0.0f)); }).find("--top-p"),
            std::string::npos);
  EXPECT_NE(test::thrown_message([] { ref::check_sampling_config(sampling(1.0f, 0, 1.5f)); }).find("--top-p"),
            std::string::npos);
}

}  // namespace
}  // namespace sg
