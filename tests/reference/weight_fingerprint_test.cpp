// reference/weight_fingerprint.h: what a changed weight does to the fingerprints the data-parallel ranks compare
// (validation.test_mode). One flipped bit anywhere changes its chunk's fingerprint and no other; two elements
// swapped change theirs (the index is mixed in); -0.0 against +0.0 differ (bits, not values); the digest changes with
// any chunk and the chunks' order.
#include "reference/weight_fingerprint.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <utility>
#include <vector>

namespace sg::ref {
namespace {

std::vector<uint64_t> fingerprints_of(const std::vector<float>& v, int64_t chunk) {
  std::vector<uint64_t> out(static_cast<size_t>(fingerprint_chunks(static_cast<int64_t>(v.size()), chunk)));
  weight_fingerprints(v.data(), 4, static_cast<int64_t>(v.size()), chunk, out.data());
  return out;
}

std::vector<float> random_values(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.02f);
  std::vector<float> v(n);
  for (float& x : v) x = normal(rng);
  return v;
}

TEST(WeightFingerprint, AFlippedBitChangesItsChunkAndNoOther) {
  const std::vector<float> base = random_values(1000, 1);
  const std::vector<uint64_t> before = fingerprints_of(base, 64);
  ASSERT_EQ(before.size(), 16u);  // the last chunk holds 40
  std::mt19937 rng(2);
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<float> v = base;
    const size_t at = rng() % v.size();
    uint32_t bits = 0;
    std::memcpy(&bits, &v[at], 4);
    bits ^= 1u << (rng() % 32);
    std::memcpy(&v[at], &bits, 4);
    const std::vector<uint64_t> after = fingerprints_of(v, 64);
    for (size_t c = 0; c < after.size(); ++c) {
      if (c == at / 64) {
        EXPECT_NE(after[c], before[c]) << "element " << at;
      } else {
        EXPECT_EQ(after[c], before[c]) << "element " << at << " changed chunk " << c;
      }
    }
  }
}

TEST(WeightFingerprint, SwappedElementsAndTheSignOfZeroChangeIt) {
  std::vector<float> v = random_values(100, 3);
  const std::vector<uint64_t> before = fingerprints_of(v, 100);
  std::swap(v[10], v[20]);
  EXPECT_NE(fingerprints_of(v, 100), before);
  std::vector<float> zeros(8, 0.0f), signed_zero = zeros;
  signed_zero[3] = -0.0f;
  EXPECT_NE(fingerprints_of(zeros, 8), fingerprints_of(signed_zero, 8));
}

TEST(WeightFingerprint, Bf16ElementsAreTwoBytesEach) {
  const std::vector<uint16_t> halves = {0x3f80, 0xbf80, 0x0000, 0x7f80, 0x1234};
  std::vector<uint64_t> out(2);
  weight_fingerprints(halves.data(), 2, 5, 3, out.data());
  EXPECT_EQ(out[0], fingerprint_mix(0x3f80, 0) + fingerprint_mix(0xbf80, 1) + fingerprint_mix(0, 2));
  EXPECT_EQ(out[1], fingerprint_mix(0x7f80, 3) + fingerprint_mix(0x1234, 4));
}

TEST(WeightFingerprint, TheDigestFollowsEveryChunkAndTheirOrder) {
  const std::vector<uint64_t> a = {1, 2, 3};
  EXPECT_EQ(fingerprint_digest(a), fingerprint_digest(std::vector<uint64_t>{1, 2, 3}));
  EXPECT_NE(fingerprint_digest(a), fingerprint_digest(std::vector<uint64_t>{1, 2, 4}));
  EXPECT_NE(fingerprint_digest(a), fingerprint_digest(std::vector<uint64_t>{3, 2, 1}));
  EXPECT_EQ(fingerprint_chunks(0, 4), 0);
  EXPECT_EQ(fingerprint_chunks(9, 4), 3);
}

}  // namespace
}  // namespace sg::ref
