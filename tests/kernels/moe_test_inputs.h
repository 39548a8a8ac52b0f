#pragma once
// Inputs shared by the MoE GPU tests (router, permute, combine): router logits whose values are well
// separated within each row (so fp32 rounding differences between the GPU and the CPU twin can never
// reorder a top-k), optionally skewed towards low experts or forced onto one expert; and byte fills.
#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "gpu_test_util.h"

namespace sg::test {

struct MoeLogitsOptions {
  float skew = 0.0f;      // > 0 favours low expert ids (high ids then often get no token at all)
  int32_t one_expert = -1;  // >= 0: this expert's logit is 20 above the row's maximum for every token
};

// Each row is a random ranking of the experts mapped to evenly spaced values (spacing 8 / E, jitter
// +-spacing / 4): two logits of a row differ by at least spacing / 2.
inline std::vector<float> separated_logits(int64_t T, int64_t E, uint64_t seed, MoeLogitsOptions o = {}) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  const float spacing = 8.0f / static_cast<float>(E);
  std::vector<float> logits(T * E), key(E);
  std::vector<int32_t> order(E);
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t e = 0; e < E; ++e) key[e] = unit(gen) + o.skew * static_cast<float>(E - e) / static_cast<float>(E);
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return key[a] < key[b]; });
    for (int64_t rank = 0; rank < E; ++rank) {
      const float jitter = (unit(gen) - 0.5f) * 0.5f * spacing;
      logits[t * E + order[rank]] = (static_cast<float>(rank) - static_cast<float>(E) / 2) * spacing + jitter;
    }
    if (o.one_expert >= 0) logits[t * E + o.one_expert] = static_cast<float>(E) / 2 * spacing + 20.0f;
  }
  return logits;
}

// Positive probs on a coarse grid (multiples of 1/8), so equal probs (ties) are common.
inline std::vector<float> tied_probs(size_t n, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::uniform_int_distribution<int> eighths(1, 8);
  std::vector<float> p(n);
  for (auto& x : p) x = static_cast<float>(eighths(gen)) / 8.0f;
  return p;
}

// Fills every byte of a device buffer (0x5A for int outputs: 0x5A5A5A5A is no valid id, row or count).
template <class T>
void fill_bytes(DeviceBuffer<T>& buffer, int byte) {
  SG_CUDA_CHECK(cudaDeviceSynchronize());
  SG_CUDA_CHECK(cudaMemset(buffer.get(), byte, buffer.size() * sizeof(T)));
  SG_CUDA_CHECK(cudaDeviceSynchronize());
}
inline constexpr int kPoisonIntByte = 0x5A;

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

}  // namespace sg::test
