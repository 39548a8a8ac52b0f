#include "reference/sampling.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "core/error.h"
#include "core/philox.h"
#include "core/strings.h"

namespace sg::ref {

void check_sampling_config(const SamplingConfig& c) {
  SG_REQUIRE(std::isfinite(c.temperature) && c.temperature >= 0.0f,
             strprintf("--temperature %g: must be >= 0 (0 = greedy)", static_cast<double>(c.temperature)));
  SG_REQUIRE(c.temperature == 0.0f || c.temperature >= kMinSamplingTemperature,
             strprintf("--temperature %g: too small to sample (below %g only logits within a few 1e-5 of the top "
                       "one are ever drawn); give 0 for greedy decoding, or at least %g",
                       static_cast<double>(c.temperature), static_cast<double>(kMinSamplingTemperature),
                       static_cast<double>(kMinSamplingTemperature)));
  SG_REQUIRE(c.top_k >= 0, strprintf("--top-k %lld: must be >= 0 (0 = off)", static_cast<long long>(c.top_k)));
  SG_REQUIRE(c.top_p > 0.0f && c.top_p <= 1.0f,
             strprintf("--top-p %g: must be in (0, 1] (1 = off)", static_cast<double>(c.top_p)));
}

namespace {

float finite_or_lowest(float x) {
  return std::isnan(x) ? -std::numeric_limits<float>::infinity() : x;
}

int32_t argmax(const float* logits, int64_t V) {
  int32_t best = 0;
  for (int64_t j = 1; j < V; ++j) {
    if (finite_or_lowest(logits[j]) > finite_or_lowest(logits[best])) best = static_cast<int32_t>(j);
  }
  return best;
}

}  // namespace

TokenDistribution sampling_distribution(const float* logits, int64_t V, const SamplingConfig& config) {
  check_sampling_config(config);
  SG_CHECK(V > 0, "sampling: the vocabulary is empty");
  TokenDistribution out;
  if (config.greedy()) {
    out.tokens = {argmax(logits, V)};
    out.probs = {1.0};
    return out;
  }
  std::vector<int32_t> order(static_cast<size_t>(V));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  const int64_t n = config.top_k > 0 ? std::min(config.top_k, V) : V;
  const double top = logits[order[0]];
  std::vector<double> w(static_cast<size_t>(n));
  double total = 0.0;
  for (int64_t j = 0; j < n; ++j) total += (w[j] = std::exp((logits[order[j]] - top) / config.temperature));
  double kept_mass = 0.0;
  for (int64_t j = 0; j < n && kept_mass < static_cast<double>(config.top_p) * total; ++j) {
    out.tokens.push_back(order[j]);
    out.probs.push_back(w[j]);
    kept_mass += w[j];
  }
  for (double& p : out.probs) p /= kept_mass;
  return out;
}

int32_t sample_token(const float* logits, int64_t V, const SamplingConfig& config, float u) {
  const TokenDistribution dist = sampling_distribution(logits, V, config);
  if (config.greedy()) return dist.tokens[0];
  double cumulative = 0.0;
  for (size_t j = 0; j < dist.tokens.size(); ++j) {
    cumulative += dist.probs[j];
    if (cumulative > static_cast<double>(u)) return dist.tokens[j];
  }
  return dist.tokens.back();
}

void sample_tokens(int32_t* tokens, const float* logits, int64_t B, int64_t V, int64_t ld, const SamplingConfig& config,
                   uint64_t step) {
  SG_CHECK(ld >= V, "sample_tokens: the row stride is smaller than the vocabulary");
  for (int64_t b = 0; b < B; ++b) {
    const float u = rng::philox_uniform(config.seed, step, kSamplingSite, static_cast<uint64_t>(b));
    tokens[b] = sample_token(logits + b * ld, V, config, u);
  }
}

}  // namespace sg::ref
