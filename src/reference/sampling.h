#pragma once
// CPU twin of src/kernels/sampling: the next token of each sequence from its logits, as Hugging Face
// generate() chooses it (temperature, then top-k, then top-p), with the project's Philox for the draw.
//
// Greedy (temperature == 0): the argmax, the lowest token id on ties; NaN logits count as -inf.
// Sampling (temperature > 0), per row of V logits:
//   order       tokens by descending logit, ties by ascending id (a stable sort)
//   top-k       keep the first n = min(top_k, V) (top_k == 0: all V)
//   weights     w_j = exp((l_j - l_0) / temperature) for the kept j (softmax up to its normaliser Z)
//   top-p       keep the first n_p tokens where token j is kept iff sum_{i<j} w_i < top_p * Z
//               (the smallest prefix holding top_p of the mass; at least one token)
//   draw        u = philox_uniform(seed, step, kSamplingSite, row); the token is the first kept j
//               with sum_{i<=j} w_i > u * Z_p (Z_p = the kept mass), the last kept one if rounding
//               leaves none
// The reference sums in fp64, the GPU in fp32 in a fixed order: they choose the same token unless u
// lies within rounding of a boundary between two tokens' intervals (the GPU test allows exactly that).
#include <cstdint>
#include <vector>

namespace sg::ref {

// Philox call site of the sampling draws (word 2 of the counter; see core/philox.h).
inline constexpr uint32_t kSamplingSite = 0x5a3du;

// The smallest temperature that samples (vLLM's epsilon too). Below it the top token is drawn but for logits within a
// few 1e-5 of it, and the GPU's fp32 1 / temperature overflows near 3e-39: 0 (greedy) says what is meant.
inline constexpr float kMinSamplingTemperature = 1e-5f;

struct SamplingConfig {
  float temperature = 0.0f;  // 0: greedy
  int64_t top_k = 0;         // 0: no top-k
  float top_p = 1.0f;        // 1: no top-p; in (0, 1]
  uint64_t seed = 0;         // Philox key of the draws

  bool greedy() const { return temperature == 0.0f; }
};

// Throws sg::Error naming the option (--temperature, --top-k, --top-p) for a value out of range (a temperature
// in (0, kMinSamplingTemperature) included).
void check_sampling_config(const SamplingConfig& config);

// The distribution sampling draws from for one row: kept tokens in order and their probabilities
// (fp64, summing to 1). For greedy, the argmax with probability 1.
struct TokenDistribution {
  std::vector<int32_t> tokens;
  std::vector<double> probs;
};
TokenDistribution sampling_distribution(const float* logits, int64_t V, const SamplingConfig& config);

// The token for one row given the uniform draw u in [0, 1) (unused when greedy).
int32_t sample_token(const float* logits, int64_t V, const SamplingConfig& config, float u);

// Every row b of logits [B, ld] (V <= ld used): tokens[b] = sample_token(row b, u(b)) with
// u(b) = philox_uniform(config.seed, step, kSamplingSite, b).
void sample_tokens(int32_t* tokens, const float* logits, int64_t B, int64_t V, int64_t ld, const SamplingConfig& config,
                   uint64_t step);

}  // namespace sg::ref
