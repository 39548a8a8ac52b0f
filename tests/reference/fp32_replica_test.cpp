// reference/fp32_replica, the CPU twin of kernels/fp32_replica.h (tests/kernels/fp32_replica_gpu_test.cu checks the
// kernels against it): each rank's replica holds the elements its shard owns and zeros elsewhere, so the sum of
// every rank's replica as int32 bit patterns (the reducer's all-reduce) is every element's value bit for bit, -0.0
// and NaN included, whatever the world size and however the shards cut the blocks; writing back touches only the
// owned elements.
#include "reference/fp32_replica.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "test_util.h"

namespace sg {
namespace {

uint32_t bits_of(float v) {
  uint32_t b = 0;
  std::memcpy(&b, &v, sizeof(b));
  return b;
}

// Three blocks of a flat buffer of `flat_size` with gaps between them in the packing (-1).
struct Packing {
  std::vector<int64_t> flat_offsets;
  int64_t flat_size = 0;
};

Packing three_blocks() {
  Packing p;
  p.flat_size = 1200;
  const auto add = [&](int64_t flat, int64_t n, int64_t gap) {
    for (int64_t i = 0; i < n; ++i) p.flat_offsets.push_back(flat + i);
    for (int64_t i = 0; i < gap; ++i) p.flat_offsets.push_back(-1);
  };
  add(100, 5, 59);
  add(400, 70, 58);
  add(1190, 3, 61);
  return p;
}

TEST(Fp32ReplicaReference, TheRanksReplicasSumAsIntegersToEveryValueExactly) {
  const Packing packing = three_blocks();
  const auto n = static_cast<int64_t>(packing.flat_offsets.size());
  std::vector<float> flat = test::random_normal(static_cast<size_t>(packing.flat_size), 7);
  flat[101] = -0.0f;  // an fp32 sum of -0 and +0 would give +0
  flat[401] = std::numeric_limits<float>::quiet_NaN();
  for (const int world : {1, 2, 3, 4, 7}) {
    const int64_t shard = (packing.flat_size + world - 1) / world;  // the last shard runs past the end (padding)
    std::vector<uint32_t> sum(static_cast<size_t>(n), 0);
    for (int r = 0; r < world; ++r) {
      std::vector<float> own(static_cast<size_t>(shard), 0.0f);
      for (int64_t i = 0; i < shard && r * shard + i < packing.flat_size; ++i) {
        own[static_cast<size_t>(i)] = flat[static_cast<size_t>(r * shard + i)];
      }
      std::vector<float> replica(static_cast<size_t>(n), 12345.0f);  // every element must be written
      ref::fp32_replica_from_shard(replica.data(), own.data(), packing.flat_offsets.data(), n, r * shard, shard);
      for (int64_t i = 0; i < n; ++i) sum[static_cast<size_t>(i)] += bits_of(replica[static_cast<size_t>(i)]);
    }
    for (int64_t i = 0; i < n; ++i) {
      const int64_t f = packing.flat_offsets[static_cast<size_t>(i)];
      const uint32_t expected = f >= 0 ? bits_of(flat[static_cast<size_t>(f)]) : 0u;
      ASSERT_EQ(sum[static_cast<size_t>(i)], expected) << "world " << world << ", element " << i << " (flat " << f << ")";
    }
  }
}

TEST(Fp32ReplicaReference, WritingBackTouchesOnlyTheOwnedElements) {
  const Packing packing = three_blocks();
  const auto n = static_cast<int64_t>(packing.flat_offsets.size());
  const std::vector<float> replica = test::random_normal(static_cast<size_t>(n), 8);
  const int64_t begin = 402, size = 800;  // cuts the second block, holds the third's first elements
  const std::vector<float> before = test::random_normal(static_cast<size_t>(size), 9);
  std::vector<float> shard = before;
  ref::fp32_replica_to_shard(shard.data(), replica.data(), packing.flat_offsets.data(), n, begin, size);
  std::vector<float> expected = before;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t f = packing.flat_offsets[static_cast<size_t>(i)];
    if (f >= begin && f < begin + size) expected[static_cast<size_t>(f - begin)] = replica[static_cast<size_t>(i)];
  }
  EXPECT_EQ(shard, expected);
  EXPECT_NE(shard, before);
  EXPECT_EQ(shard[0], replica[64 + 2]);     // flat 402: the second block's third element
  EXPECT_EQ(shard[1190 - begin], replica[64 + 128]);  // flat 1190: the third block's first
  EXPECT_EQ(shard[300], before[300]);       // flat 702: in no block
}

}  // namespace
}  // namespace sg
