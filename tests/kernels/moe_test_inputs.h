#pragma once
// Inputs shared by the MoE GPU tests (router, permute, combine): router logits whose values are well
// separated within each row (so fp32 rounding differences between the GPU and the CPU twin can never
// reorder a top-k), optionally skewed towards low experts or forced onto one expert; and byte fills.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <ostream>
#include <random>
#include <vector>

#include "gpu_test_util.h"
#include "reference/moe_permute.h"
#include "reference/moe_router.h"

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

inline void device_sync() { SG_CUDA_CHECK(cudaDeviceSynchronize()); }

// One dispatch shape for the permute and combine tests (odd T and H, E in {1, 3, 8, 128}, k in
// {1, 2, 8}, dropless and both drop policies, with and without padding).
struct MoeDispatchCase {
  const char* name;
  int64_t T, E, k, H;
  double capacity_factor;  // 0: dropless
  ref::MoeDropPolicy policy;
  bool pad;
  MoeLogitsOptions logits;

  ref::MoeDispatch dispatch() const {
    return {.T = T,
            .E = E,
            .k = k,
            .capacity = capacity_factor > 0 ? ref::moe_expert_capacity(T, k, E, capacity_factor, pad) : 0,
            .drop_policy = policy,
            .pad_to_capacity = pad};
  }
  // The CPU router's top-k (softmax) of separated logits drawn from `seed`: routing map and probs [T, k].
  struct Routed {
    ref::MoeDispatch dispatch;
    int64_t slots, rows;  // T k, permuted rows
    std::vector<int32_t> map;
    std::vector<float> probs;
  };
  Routed route(uint64_t seed) const {
    Routed r{.dispatch = dispatch(), .slots = T * k, .rows = dispatch().permuted_rows(), .map = {}, .probs = {}};
    r.map.resize(T * k);
    r.probs.resize(T * k);
    const auto x = separated_logits(T, E, seed, logits);
    ref::moe_router_forward(r.map.data(), r.probs.data(), x.data(), nullptr, {.T = T, .E = E, .k = k});
    return r;
  }
  uint64_t seed(uint64_t base) const { return base + static_cast<uint64_t>(T * 7 + E * 3 + k); }
};

// gtest prints the case by name (not as bytes) in listings and failures.
inline void PrintTo(const MoeDispatchCase& c, std::ostream* os) { *os << c.name; }

inline const MoeDispatchCase kMoeDispatchCases[] = {
    {"single_expert", 1, 1, 1, 8, 0.0, ref::MoeDropPolicy::probs, false, {}},
    {"dropless_E3_k2_odd_H", 7, 3, 2, 37, 0.0, ref::MoeDropPolicy::probs, false, {}},
    {"drop_probs_E8", 33, 8, 2, 64, 0.75, ref::MoeDropPolicy::probs, false, {.skew = 2.0f}},
    {"drop_position_pad_k_equals_E", 257, 8, 8, 24, 0.5, ref::MoeDropPolicy::position, true, {}},
    {"dropless_E128_k8_skewed", 1001, 128, 8, 200, 0.0, ref::MoeDropPolicy::probs, false, {.skew = 2.0f}},
    {"drop_probs_pad_all_on_one_expert", 129, 128, 1, 136, 1.0, ref::MoeDropPolicy::probs, true, {.one_expert = 77}},
    {"drop_position_E128", 515, 128, 2, 99, 1.25, ref::MoeDropPolicy::position, false, {.skew = 1.0f}},
    {"dropless_one_expert_many_chunks", 4097, 8, 2, 512, 0.0, ref::MoeDropPolicy::probs, false, {.one_expert = 0}},
    {"mostly_empty_experts", 2, 128, 2, 16, 0.0, ref::MoeDropPolicy::probs, false, {}},
    {"dropless_wide_H", 301, 8, 2, 2056, 0.0, ref::MoeDropPolicy::probs, false, {}},
    {"dropless_large_sort", 20001, 128, 8, 16, 0.0, ref::MoeDropPolicy::probs, false, {.skew = 1.0f}},
    {"drop_probs_pad_large", 8191, 128, 8, 8, 1.0, ref::MoeDropPolicy::probs, true, {.skew = 1.0f}},
    // top-3: the gather's second batch of slots is partial; rows not a multiple of the expand's 4
    {"dropless_k3_partial_batch", 99, 6, 3, 40, 0.0, ref::MoeDropPolicy::probs, false, {}},
    {"dropless_small_moe_shape", 8192, 8, 2, 768, 0.0, ref::MoeDropPolicy::probs, false, {}},
    // "Never drop" factors: ceil(T k / E x factor) is past int32 (1e9) and int64 (1e300); unpadded, the capacity
    // is clamped to T (reference/moe_permute.h), where the plan kernel's int capacity went negative.
    {"never_drop_factor_1e9_probs", 16384, 8, 2, 16, 1e9, ref::MoeDropPolicy::probs, false, {.skew = 1.0f}},
    {"never_drop_factor_1e300_position", 16384, 8, 2, 16, 1e300, ref::MoeDropPolicy::position, false, {}},
};

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

}  // namespace sg::test
