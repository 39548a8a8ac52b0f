// model/dropout_sites.h's attention dropout seed and offset (what model/attention_dropout_seeds.cu writes on
// the device for cuDNN, once per microbatch; the formula is constexpr, so it is checked here on the host):
//   * splitmix64 is SplitMix64 (Vigna's reference outputs);
//   * attention_dropout_seed: deterministic, non-negative, different for every attention layer (site) of one
//     generator seed, for every generator seed of one layer, and for every (seed, site) pair of a small grid
//     (the microbatches of a run differ by the offset, below);
//   * attention_dropout_offset: the microbatch's offset spread by 2^32, non-negative, so consecutive
//     microbatches' cuDNN counter ranges (less than 2^32 wide) never overlap;
//   * together: every (layer, step, microbatch) of a run draws from its own (seed, offset) pair, and a rerun
//     from the same generator state draws the same ones.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <set>
#include <utility>
#include <vector>

#include "model/dropout_sites.h"

namespace sg::model {
namespace {

constexpr uint64_t k2To32 = uint64_t{1} << 32;

// The generator state of microbatch `microbatch` of step `step`, as the header documents it: microbatch k
// of the run (0-based, over all steps) draws with offset = initial offset + k * kRngOffsetPerMicrobatch.
rng::RngState microbatch_state(rng::RngState initial, int64_t step, int64_t microbatches, int64_t microbatch) {
  const auto k = static_cast<uint64_t>(step * microbatches + microbatch);
  return rng::RngState{initial.seed, initial.offset + k * kRngOffsetPerMicrobatch};
}

// Vigna's splitmix64.c from state 0 (next() adds the increment, then mixes): its first three outputs.
TEST(AttentionDropoutSeed, Splitmix64IsTheReferenceGenerator) {
  constexpr uint64_t kGolden = 0x9E3779B97F4A7C15ull;
  EXPECT_EQ(splitmix64(0), 0xE220A8397B1DCDAFull);
  EXPECT_EQ(splitmix64(kGolden), 0x6E789E6AA1B965F4ull);
  EXPECT_EQ(splitmix64(2 * kGolden), 0x06C45D188009454Full);
}

// The generator seeds a run may have: small, large, with the top bit set.
const std::vector<uint64_t> kSeeds = {
    0, 1, 2, 42, 1234, 0xFFFFFFFFull, 0x100000000ull, 0x8000000000000000ull, 0xFFFFFFFFFFFFFFFFull};

TEST(AttentionDropoutSeed, EveryLayerOfOneSeedGetsItsOwnSeed) {
  for (const uint64_t seed : kSeeds) {
    std::set<int64_t> seen;
    for (uint32_t site = 0; site < 3 * 256; site += 3) {  // the dense model's attention sites, 256 blocks
      EXPECT_TRUE(seen.insert(attention_dropout_seed(seed, site)).second)
          << "seed " << seed << ": site " << site << " shares its cuDNN seed with an earlier layer";
    }
    // And sites as a hybrid or MoE stack hands them out (any numbers, up to the top of uint32).
    for (const uint32_t site : {1u, 2u, 4u, 5u, 0xFFFFu, 0x10000u, 0xFFFFFFFFu}) {
      EXPECT_TRUE(seen.insert(attention_dropout_seed(seed, site)).second) << "seed " << seed << " site " << site;
    }
  }
}

TEST(AttentionDropoutSeed, EveryGeneratorSeedGivesOneLayerItsOwnSeed) {
  for (const uint32_t site : {0u, 3u, 1000u}) {
    std::set<int64_t> seen;
    for (const uint64_t seed : kSeeds) {
      EXPECT_TRUE(seen.insert(attention_dropout_seed(seed, site)).second) << "site " << site << " seed " << seed;
    }
    for (uint64_t seed = 100; seed < 1100; ++seed) {
      EXPECT_TRUE(seen.insert(attention_dropout_seed(seed, site)).second) << "site " << site << " seed " << seed;
    }
  }
}

// Across runs too: a layer of one run never shares its cuDNN seed with any layer of a run with another
// generator seed (a seed + site mix would give run 1's layer 3 the seed of run 4's layer 0).
TEST(AttentionDropoutSeed, NoTwoSeedAndSitePairsShareASeed) {
  std::set<int64_t> seen;
  for (uint64_t seed = 0; seed < 64; ++seed) {
    for (uint32_t site = 0; site < 192; ++site) {
      EXPECT_TRUE(seen.insert(attention_dropout_seed(seed, site)).second) << "seed " << seed << " site " << site;
    }
  }
}

// cuDNN takes an int64 seed; the values stay non-negative (the top bit dropped) for any input.
TEST(AttentionDropoutSeed, SeedsAreNonNegative) {
  int64_t largest = 0;
  for (const uint64_t seed : kSeeds) {
    for (uint32_t site = 0; site < 4096; ++site) {
      const int64_t s = attention_dropout_seed(seed, site);
      EXPECT_GE(s, 0) << "seed " << seed << " site " << site;
      largest = std::max(largest, s);
    }
  }
  // Still a 63-bit hash, not a small one: some value uses the top remaining bit.
  EXPECT_GE(largest, int64_t{1} << 62);
}

TEST(AttentionDropoutSeed, SeedsAreDeterministic) {
  // Constant-evaluable (the device kernel and the host share one definition), and equal call to call.
  constexpr int64_t at_compile_time = attention_dropout_seed(1234, 3);
  EXPECT_EQ(attention_dropout_seed(1234, 3), at_compile_time);
  for (const uint64_t seed : kSeeds) EXPECT_EQ(attention_dropout_seed(seed, 9), attention_dropout_seed(seed, 9));
}

TEST(AttentionDropoutOffset, TheMicrobatchOffsetIsSpreadBy2To32) {
  for (const uint64_t offset :
       {uint64_t{0}, uint64_t{1}, uint64_t{2}, uint64_t{12345}, uint64_t{0x7FFFFFFE}, uint64_t{0x7FFFFFFF}}) {
    EXPECT_EQ(static_cast<uint64_t>(attention_dropout_offset(offset)), offset * k2To32) << offset;
  }
  // Consecutive generator offsets: exactly 2^32 apart.
  for (uint64_t offset = 0; offset < 1000; ++offset) {
    EXPECT_EQ(attention_dropout_offset(offset + 1) - attention_dropout_offset(offset), static_cast<int64_t>(k2To32));
  }
  // Consecutive microbatches (kRngOffsetPerMicrobatch apart): at least 2^32 apart, so their counter ranges
  // do not overlap.
  for (const rng::RngState initial : {rng::RngState{1, 0}, rng::RngState{1, 1000}}) {
    for (int64_t k = 0; k < 64; ++k) {
      const int64_t here = attention_dropout_offset(microbatch_state(initial, 0, 64, k).offset);
      const int64_t next = attention_dropout_offset(microbatch_state(initial, 0, 64, k + 1).offset);
      EXPECT_GE(next - here, static_cast<int64_t>(k2To32)) << "microbatch " << k;
    }
  }
}

// For any generator offset (a long run, or a state with high bits), the value is non-negative and a
// multiple of 2^32.
TEST(AttentionDropoutOffset, OffsetsAreNonNegativeForAnyOffset) {
  for (const uint64_t offset : {uint64_t{0x80000000}, uint64_t{0xFFFFFFFF}, uint64_t{0x100000000},
                                uint64_t{0x8000000000000000}, std::numeric_limits<uint64_t>::max()}) {
    const int64_t o = attention_dropout_offset(offset);
    EXPECT_GE(o, 0) << offset;
    EXPECT_EQ(static_cast<uint64_t>(o) % k2To32, 0u) << offset;
  }
}

// The offset keeps 31 bits of the generator offset; the rest enters the seed. 16384 microbatches a step pass
// 2^31 of them at step 131073: its first microbatch must not draw step 1's first masks again (the same cuDNN seed
// and offset before), and neither must any later epoch's. The first epoch's seed is the (seed, site) hash alone.
TEST(AttentionDropoutSeed, OffsetsPast2To31DrawNewStreams) {
  constexpr uint64_t k2To31 = uint64_t{1} << 31;
  EXPECT_EQ(uint64_t{131072} * 16384, k2To31);  // the first microbatch of step 131073
  for (const uint64_t seed : kSeeds) {
    for (const uint32_t site : {0u, 3u, 93u}) {
      EXPECT_EQ(attention_dropout_seed(seed, site, k2To31 - 1), attention_dropout_seed(seed, site));
      std::set<std::pair<int64_t, int64_t>> draws;
      for (const uint64_t offset : {uint64_t{0}, k2To31, 2 * k2To31, 3 * k2To31, uint64_t{1} << 40,
                                    std::numeric_limits<uint64_t>::max() - (k2To31 - 1)}) {
        const int64_t s = attention_dropout_seed(seed, site, offset);
        EXPECT_GE(s, 0);
        EXPECT_EQ(attention_dropout_offset(offset), 0) << offset;
        EXPECT_TRUE(draws.insert({s, attention_dropout_offset(offset)}).second)
            << "seed " << seed << " site " << site << " offset " << offset << " repeats an earlier draw";
      }
    }
  }
}

// The dense model's sites (attention_probs 3b, attention_output 3b+1, mlp_output 3b+2) handed out by
// the allocator.
TEST(DropoutSiteAllocator, HandsOutTheDenseModelsSitesInStackOrder) {
  DropoutSiteAllocator sites;
  for (uint32_t b = 0; b < 4; ++b) {
    EXPECT_EQ(sites.next(), 3 * b);      // attention probabilities
    EXPECT_EQ(sites.next(), 3 * b + 1);  // attention output
    EXPECT_EQ(sites.next(), 3 * b + 2);  // mlp output
  }
  EXPECT_EQ(sites.count(), 12u);
}

// A run's draws: every attention layer in every microbatch of every step has its own (seed, offset), and
// a rerun from the same generator state has the same ones.
TEST(AttentionDropoutSeed, EveryLayerMicrobatchAndStepDrawsItsOwnStream) {
  const int layers = 6;
  const int64_t steps = 3, microbatches = 4;
  std::vector<uint32_t> attention_sites;
  DropoutSiteAllocator allocator;
  for (int b = 0; b < layers; ++b) {
    attention_sites.push_back(allocator.next());
    allocator.next();
    allocator.next();
  }
  const auto draws = [&](rng::RngState initial) {
    std::vector<std::pair<int64_t, int64_t>> out;
    for (int64_t step = 0; step < steps; ++step) {
      for (int64_t mb = 0; mb < microbatches; ++mb) {
        const rng::RngState s = microbatch_state(initial, step, microbatches, mb);
        for (const uint32_t site : attention_sites) {
          out.emplace_back(attention_dropout_seed(s.seed, site), attention_dropout_offset(s.offset));
        }
      }
    }
    return out;
  };
  for (const rng::RngState initial : {rng::RngState{1234, 0}, rng::RngState{0, 7}}) {
    const auto run = draws(initial);
    const std::set<std::pair<int64_t, int64_t>> distinct(run.begin(), run.end());
    EXPECT_EQ(distinct.size(), run.size()) << "two (layer, step, microbatch) draw the same cuDNN stream";
    EXPECT_EQ(draws(initial), run) << "a rerun from the same state draws other streams";
  }
  EXPECT_NE(draws({1234, 0}), draws({1235, 0})) << "another generator seed, the same streams";
}

}  // namespace
}  // namespace sg::model
