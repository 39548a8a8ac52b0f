// The data-parallel arithmetic over the flat parameter buffer (dist/sharding.h): shard bounds, padding,
// buckets, the weight-decay boundary inside a shard, and the checkpoint gather/scatter — saved at one
// world size, loaded at another.
#include <gtest/gtest.h>

#include <numeric>
#include <vector>

#include "core/error.h"
#include "dist/sharding.h"
#include "test_util.h"

namespace sg::dist {
namespace {

std::vector<DataParallelLayout> all_ranks(int64_t n, int world, bool sharded, int64_t bucket = 0) {
  std::vector<DataParallelLayout> out;
  for (int r = 0; r < world; ++r) out.push_back(plan_data_parallel(n, world, r, sharded, bucket));
  return out;
}

const int64_t kSizes[] = {0, 1, 127, 128, 1000, 4097, 123457, 7'000'001};
const int kWorlds[] = {1, 2, 3, 4, 7, 8};

TEST(Sharding, ShardsTileThePaddedBufferAlignedAndCoverEveryParameter) {
  for (const int64_t n : kSizes) {
    for (const int world : kWorlds) {
      const auto layouts = all_ranks(n, world, true);
      const int64_t padded = layouts[0].padded_params;
      EXPECT_GE(padded, n);
      EXPECT_EQ(padded % (world * kShardAlignment), 0) << n << " " << world;
      if (n > 0) {  // (an empty model still gets one aligned element per rank)
        EXPECT_LT(padded - n, world * kShardAlignment) << "padding is less than one unit: " << n << " " << world;
      }
      int64_t next = 0;
      for (const DataParallelLayout& l : layouts) {
        EXPECT_EQ(l.padded_params, padded);
        EXPECT_EQ(l.owned.begin, next) << "contiguous, in rank order";
        EXPECT_EQ(l.owned.begin % kShardAlignment, 0);
        EXPECT_EQ(l.owned.size, padded / world) << "equal shards (NCCL's reduce-scatter and all-gather need them)";
        EXPECT_EQ(l.optimizer_elements(), l.owned.size);
        int64_t in_buckets = 0;
        for (const GradientBucket& b : l.buckets) in_buckets += b.range.size;
        EXPECT_EQ(in_buckets, padded) << "the buckets tile the padded buffer";
        next = l.owned.end();
      }
      EXPECT_EQ(next, padded);
    }
  }
}

TEST(Sharding, UnshardedRanksOwnEverythingAndBucketsTileIt) {
  for (const int64_t n : kSizes) {
    for (const int64_t bucket : {int64_t{1}, int64_t{128}, int64_t{1000}, int64_t{0}}) {
      const DataParallelLayout l = plan_data_parallel(n, 4, 3, false, bucket);
      EXPECT_EQ(l.padded_params, n);
      EXPECT_EQ(l.owned, (FlatRange{0, n}));
      const int64_t limit = bucket > 0 ? (bucket + kShardAlignment - 1) / kShardAlignment * kShardAlignment
                                       : default_bucket_size(4);
      int64_t next = 0;
      // Without readiness everything is ready at once: launched from the top of the buffer down.
      for (auto b = l.buckets.rbegin(); b != l.buckets.rend(); ++b) {
        EXPECT_EQ(b->range.begin, next);
        EXPECT_EQ(b->range.begin % kShardAlignment, 0);
        EXPECT_GT(b->range.size, 0);
        EXPECT_LE(b->range.size, limit);
        EXPECT_EQ(b->owner, -1);
        next = b->range.end();
      }
      EXPECT_EQ(next, n);
      if (n > 0) {
        EXPECT_GE(static_cast<int64_t>(l.buckets.size()), (n + limit - 1) / limit);
        EXPECT_LE(static_cast<int64_t>(l.buckets.size()), (n + limit - 1) / limit + 1);
      }
    }
  }
}

TEST(Sharding, MegatronDefaultBucketSize) {
  EXPECT_EQ(default_bucket_size(1), 40'000'000);
  EXPECT_EQ(default_bucket_size(64), 64'000'000);
}

TEST(Sharding, DecayBoundaryInsideAShard) {
  // Matrices [0, n_decay) are decayed, norms after: each shard decays exactly its part of [0, n_decay).
  for (const int world : kWorlds) {
    for (const int64_t n_decay : {int64_t{0}, int64_t{1}, int64_t{500}, int64_t{4096}, int64_t{4097}}) {
      const auto layouts = all_ranks(4097, world, true);
      int64_t total = 0;
      for (const DataParallelLayout& l : layouts) {
        const int64_t d = decayed_elements_in(l.owned, n_decay);
        EXPECT_GE(d, 0);
        EXPECT_LE(d, l.owned.size);
        // Elements [begin, begin + d) are exactly the decayed ones of this shard.
        for (int64_t i = l.owned.begin; i < l.owned.end(); ++i) {
          EXPECT_EQ(i - l.owned.begin < d, i < n_decay) << "rank " << l.rank << " element " << i;
        }
        total += d;
      }
      EXPECT_EQ(total, n_decay);
    }
  }
}

TEST(Sharding, SlicesOfAFullVectorGatherBackToIt) {
  for (const int64_t n : kSizes) {
    if (n > 200000) continue;
    const std::vector<float> full = test::random_normal(static_cast<size_t>(n), 17 + static_cast<uint64_t>(n));
    for (const int world : kWorlds) {
      for (const bool sharded : {true, false}) {
        const auto layouts = all_ranks(n, world, sharded);
        std::vector<std::vector<float>> slices;
        for (const DataParallelLayout& l : layouts) {
          slices.push_back(owned_slice(full, l));
          ASSERT_EQ(static_cast<int64_t>(slices.back().size()), l.owned.size);
          for (int64_t i = std::max(l.owned.begin, n); i < l.owned.end(); ++i) {
            EXPECT_EQ(slices.back()[static_cast<size_t>(i - l.owned.begin)], 0.0f) << "padding is zero";
          }
        }
        EXPECT_EQ(assemble_from_slices(slices, layouts), full) << "n " << n << " world " << world;
      }
    }
  }
}

TEST(Sharding, SaveAtOneWorldSizeResumeAtAnother) {
  // A checkpoint holds full vectors: saved from world size A's shards, loaded as world size B's shards,
  // each rank of B gets exactly the values it would own had the run used B from the start.
  const int64_t n = 12345;
  const std::vector<float> state = test::random_normal(static_cast<size_t>(n), 99);
  for (const int a : kWorlds) {
    const auto layouts_a = all_ranks(n, a, true);
    std::vector<std::vector<float>> shards_a;
    for (const auto& l : layouts_a) shards_a.push_back(owned_slice(state, l));
    const std::vector<float> saved = assemble_from_slices(shards_a, layouts_a);
    for (const int b : kWorlds) {
      for (const auto& l : all_ranks(n, b, true)) {
        const std::vector<float> loaded = owned_slice(saved, l);
        for (int64_t i = l.owned.begin; i < std::min(l.owned.end(), n); ++i) {
          ASSERT_EQ(loaded[static_cast<size_t>(i - l.owned.begin)], state[static_cast<size_t>(i)])
              << "saved at " << a << ", loaded at " << b << ", rank " << l.rank;
        }
      }
    }
  }
}

TEST(Sharding, ClearErrors) {
  EXPECT_THROW(plan_data_parallel(10, 0, 0, true), Error);
  EXPECT_THROW(plan_data_parallel(10, 2, 2, true), Error);
  EXPECT_THROW(plan_data_parallel(-1, 2, 0, true), Error);
  const auto layouts = all_ranks(1000, 2, true);
  EXPECT_THROW(owned_slice(std::vector<float>(999), layouts[0]), Error);
  EXPECT_THROW(assemble_from_slices({std::vector<float>(1)}, layouts), Error);
  try {
    plan_data_parallel(10, 2, 5, false);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("rank 5"), std::string::npos) << e.what();
  }
}

TEST(Sharding, Describe) {
  EXPECT_NE(plan_data_parallel(1000, 2, 1, true).describe().find("owns [512, 1024)"), std::string::npos);
  EXPECT_NE(plan_data_parallel(1000, 2, 1, false).describe().find("all-reduced in 1 bucket"), std::string::npos);
}

}  // namespace
}  // namespace sg::dist
