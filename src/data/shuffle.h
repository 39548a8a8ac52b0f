#pragma once
// Fully specified pseudo-random helpers for the data pipeline. std::uniform_int_distribution and
// std::shuffle are implementation-defined, so a sample order built with them could change with the
// standard library and break exact resume; these are defined here bit for bit.
#include <cstdint>
#include <type_traits>
#include <vector>

namespace sg::data {

// SplitMix64 (Steele, Lea, Flood 2014): one step of the generator; also a good 64-bit mixer.
inline uint64_t splitmix64_next(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// A stateless hash of a few words (for per-sample / per-epoch seeds).
inline uint64_t mix_seed(uint64_t a, uint64_t b, uint64_t c = 0) {
  uint64_t s = a;
  uint64_t h = splitmix64_next(s);
  s = h ^ b;
  h = splitmix64_next(s);
  s = h ^ c;
  return splitmix64_next(s);
}

class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}
  uint64_t next() { return splitmix64_next(state_); }
  // Uniform in [0, bound) without bias (Lemire's multiply-shift with rejection). bound > 0.
  uint64_t below(uint64_t bound) {
    unsigned __int128 m = static_cast<unsigned __int128>(next()) * bound;
    uint64_t low = static_cast<uint64_t>(m);
    if (low < bound) {
      const uint64_t threshold = (0 - bound) % bound;
      while (low < threshold) {
        m = static_cast<unsigned __int128>(next()) * bound;
        low = static_cast<uint64_t>(m);
      }
    }
    return static_cast<uint64_t>(m >> 64);
  }
  // Uniform integer in [lo, hi] (inclusive).
  int64_t between(int64_t lo, int64_t hi) {
    return lo + static_cast<int64_t>(below(static_cast<uint64_t>(hi - lo) + 1));
  }

 private:
  uint64_t state_;
};

// A seeded permutation of 0..n-1 (Fisher-Yates, specified above), stored as T: the same permutation for every T
// that holds n - 1 (uint32_t halves a large corpus's 8 bytes a window: 2.4e8 windows of a 10^12-token corpus at
// seq_length 4096 are 1 GB instead of 2 GB, in every rank).
template <class T = uint64_t>
std::vector<T> seeded_permutation(uint64_t n, uint64_t seed) {
  static_assert(std::is_unsigned_v<T>, "a permutation holds indices");
  std::vector<T> perm(n);
  for (uint64_t i = 0; i < n; ++i) perm[i] = static_cast<T>(i);
  SplitMix64 rng(seed);
  for (uint64_t i = n; i > 1; --i) {
    const uint64_t j = rng.below(i);
    const T tmp = perm[i - 1];
    perm[i - 1] = perm[j];
    perm[j] = tmp;
  }
  return perm;
}

}  // namespace sg::data
