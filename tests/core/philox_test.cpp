// Philox4x32-10 against Random123's published known-answer vectors (kat_vectors, philox4x32 R=10),
// and the layout of philox_bits / philox_uniform that kernels and CPU twins share.
#include "core/philox.h"

#include <gtest/gtest.h>

#include <cmath>
#include <set>
#include <utility>

namespace sg::rng {
namespace {

void expect_block(Philox4x32Counter ctr, Philox4x32Key key, const uint32_t (&expected)[4]) {
  const Philox4x32Counter out = philox4x32_10(ctr, key);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(out.v[i], expected[i]) << "word " << i;
}

TEST(Philox, KnownAnswerZero) {
  expect_block({{0, 0, 0, 0}}, {{0, 0}}, {0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u});
}

TEST(Philox, KnownAnswerAllOnes) {
  expect_block({{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}}, {{0xffffffffu, 0xffffffffu}},
               {0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu});
}

TEST(Philox, KnownAnswerPi) {
  expect_block({{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}}, {{0xa4093822u, 0x299f31d0u}},
               {0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u});
}

// philox_bits: counter = philox_counter(index/4, site, offset) = (index/4 lo, index/4 hi ^ (offset hi << 16), site,
// offset lo), key = seed (lo, hi), word index%4. Below offset 2^32 (here) that is (index/4 lo, index/4 hi, site,
// offset lo): the layout every draw so far had, pinned.
TEST(Philox, BitsLayout) {
  const uint64_t seed = 0x0123456789abcdefULL, offset = 77;
  const uint32_t site = 5;
  for (uint64_t index : {0ULL, 1ULL, 2ULL, 3ULL, 4ULL, 1000003ULL, (1ULL << 34) + 6}) {
    const uint64_t block = index / 4;
    const Philox4x32Counter out = philox4x32_10(
        {{static_cast<uint32_t>(block), static_cast<uint32_t>(block >> 32), site, static_cast<uint32_t>(offset)}},
        {{0x89abcdefu, 0x01234567u}});
    EXPECT_EQ(philox_bits(seed, offset, site, index), out.v[index % 4]) << "index " << index;
  }
}

// The offset's high bits enter counter word 1 (shifted by 16, so an index's block hi below 2^16 never meets them):
// offsets 2^32 apart draw different numbers (a run's generator offset passes 2^32 after 2^32 microbatches of the
// global batch), and (block, offset) -> counter stays one-to-one for blocks and offsets below 2^48.
TEST(Philox, OffsetHighBitsEnterTheCounter) {
  constexpr uint64_t k2To32 = uint64_t{1} << 32;
  for (uint64_t index : {0ULL, 3ULL, 4ULL, 1000003ULL, (1ULL << 34) + 6}) {
    std::set<uint32_t> words;
    for (uint64_t offset : {uint64_t{9}, k2To32 + 9, 2 * k2To32 + 9, (uint64_t{1} << 47) + 9}) {
      words.insert(philox_bits(42, offset, 3, index));
    }
    EXPECT_EQ(words.size(), 4u) << "index " << index;
  }
  const Philox4x32Counter c = philox_counter(0x0000'0005'0000'0007ULL, 11, 0x0000'0003'0000'0009ULL);
  EXPECT_EQ(c.v[0], 7u);
  EXPECT_EQ(c.v[1], 5u | (3u << 16));
  EXPECT_EQ(c.v[2], 11u);
  EXPECT_EQ(c.v[3], 9u);
  // One-to-one below 2^48: a block hi and an offset hi never share bits.
  std::set<std::pair<uint32_t, uint32_t>> seen;
  for (uint64_t block_hi : {0ULL, 1ULL, 0xFFFFULL})
    for (uint64_t offset_hi : {0ULL, 1ULL, 0xFFFFULL}) {
      const Philox4x32Counter k = philox_counter(block_hi << 32, 0, offset_hi << 32);
      EXPECT_TRUE(seen.insert({k.v[1], k.v[3]}).second) << block_hi << " " << offset_hi;
    }
}

TEST(Philox, UniformIsExact24BitFraction) {
  for (uint64_t i = 0; i < 1000; ++i) {
    const uint32_t bits = philox_bits(42, 3, 1, i);
    const float u = philox_uniform(42, 3, 1, i);
    EXPECT_GE(u, 0.0f);
    EXPECT_LT(u, 1.0f);
    EXPECT_EQ(u * 16777216.0f, static_cast<float>(bits >> 8));
  }
}

TEST(Philox, UniformMomentsAreUniform) {
  constexpr int n = 200000;
  double sum = 0.0, sum2 = 0.0;
  for (int i = 0; i < n; ++i) {
    const double u = philox_uniform(1234, 0, 9, static_cast<uint64_t>(i));
    sum += u;
    sum2 += u * u;
  }
  const double mean = sum / n, var = sum2 / n - mean * mean;
  EXPECT_NEAR(mean, 0.5, 0.005);        // stddev of the mean ~ 0.00065
  EXPECT_NEAR(var, 1.0 / 12.0, 0.002);  // uniform variance
}

TEST(Philox, SeedOffsetSiteGiveDistinctStreams) {
  std::set<uint32_t> firsts;
  for (uint64_t seed : {1ULL, 2ULL})
    for (uint64_t offset : {0ULL, 1ULL})
      for (uint32_t site : {0u, 1u}) firsts.insert(philox_bits(seed, offset, site, 0));
  EXPECT_EQ(firsts.size(), 8u);
  // Seed high word matters too.
  EXPECT_NE(philox_bits(1, 0, 0, 0), philox_bits(1 + (1ULL << 32), 0, 0, 0));
}

}  // namespace
}  // namespace sg::rng
