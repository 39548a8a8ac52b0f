// The gradient buckets (dist/gradient_buckets.h): which contiguous ranges of the flat gradient buffer
// are reduced together, when (the backward's ready point), and, with the distributed optimizer, into
// which rank — for model-like readiness (matrices in reverse backward order, then the vectors in
// forward order), every bucket size and world size.
#include "dist/gradient_buckets.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "core/error.h"
#include "dist/sharding.h"
#include "test_util.h"

namespace sg::dist {
namespace {

// A model of `layers` layers laid out as the step lays it out (model/param_builder.h): the embedding,
// each layer's matrices, the LM head; then per layer its pre-norm and vectors, the final norm. Sizes in
// units of 64 elements (the parameter alignment), some odd so buckets split inside runs.
GradientReadiness model_like(int layers, int64_t* total) {
  const int N = layers, last = N + 1;
  std::vector<GradientSegment> s;
  int64_t at = 0;
  const auto add = [&](int64_t units, int point) {
    s.push_back({{at, units * 64 - 5}, point});  // a gap of 5 elements after each tensor
    at += units * 64;
  };
  add(40, last);                                           // embedding
  for (int i = 0; i < N; ++i) add(7 + 3 * i, N - i);       // layer i's matrices
  add(40, 0);                                              // LM head
  for (int i = 0; i < N; ++i) {
    add(1, i == 0 ? last : N - i + 1);                     // layer i's pre-norm
    add(2, N - i);                                         // layer i's vectors
  }
  add(1, 1);                                               // final norm
  *total = at;
  return {N + 2, s};
}

// The ready point of every element.
std::vector<int> element_points(int64_t total, const GradientReadiness& r) {
  std::vector<int> out(static_cast<size_t>(total), -1);
  for (const GradientSegment& run : ready_runs(total, r)) {
    for (int64_t i = run.range.begin; i < run.range.end(); ++i) out[static_cast<size_t>(i)] = run.ready_point;
  }
  return out;
}

TEST(GradientBuckets, ReadyRunsFillTheGapsFromBelow) {
  const GradientReadiness r{4, {{{10, 5}, 3}, {{20, 10}, 1}, {{30, 4}, 1}, {{40, 2}, 2}}};
  EXPECT_EQ(ready_runs(50, r), (std::vector<GradientSegment>{{{0, 20}, 3}, {{20, 20}, 1}, {{40, 10}, 2}}));
  EXPECT_EQ(ready_runs(50, GradientReadiness{3, {}}), (std::vector<GradientSegment>{{{0, 50}, 2}}))
      << "no readiness: everything at the end of the backward";
  EXPECT_TRUE(ready_runs(0, GradientReadiness{}).empty());
}

TEST(GradientBuckets, TileTheBufferWithinTheSizeEachReadyWhenItsLastElementIs) {
  for (const int layers : {1, 2, 5}) {
    int64_t n = 0;
    const GradientReadiness r = model_like(layers, &n);
    for (const int world : {0, 1, 2, 3, 8}) {  // 0: all-reduce
      const int64_t total = world == 0 ? n : padded_size(n, world);
      std::vector<FlatRange> shards;
      for (int rank = 0; rank < world; ++rank) shards.push_back(shard_range(total, world, rank));
      const std::vector<int> points = element_points(total, r);
      for (const int64_t bucket_size : {int64_t{1}, int64_t{100}, int64_t{1000}, int64_t{5000}, int64_t{1} << 40}) {
        SCOPED_TRACE(testing::Message() << layers << " layers, world " << world << ", bucket " << bucket_size);
        const std::vector<GradientBucket> buckets = plan_gradient_buckets(total, r, bucket_size, shards, 128);
        const int64_t limit = (bucket_size + 127) / 128 * 128;
        // Launch order: by ready point, then from the top of the buffer down.
        for (size_t b = 1; b < buckets.size(); ++b) {
          const GradientBucket &x = buckets[b - 1], &y = buckets[b];
          EXPECT_TRUE(x.ready_point < y.ready_point || (x.ready_point == y.ready_point && x.range.begin > y.range.begin));
        }
        std::vector<GradientBucket> by_address = buckets;
        std::sort(by_address.begin(), by_address.end(),
                  [](const GradientBucket& a, const GradientBucket& b) { return a.range.begin < b.range.begin; });
        int64_t next = 0;
        for (const GradientBucket& b : by_address) {
          ASSERT_EQ(b.range.begin, next) << "contiguous, no overlap";
          ASSERT_GT(b.range.size, 0);
          EXPECT_LE(b.range.size, limit);
          int latest = 0;
          for (int64_t i = b.range.begin; i < b.range.end(); ++i) latest = std::max(latest, points[static_cast<size_t>(i)]);
          EXPECT_EQ(b.ready_point, latest) << "a bucket is reduced once its LAST element is final, not before";
          if (world > 0) {
            const FlatRange& shard = shards[static_cast<size_t>(b.owner)];
            EXPECT_TRUE(b.range.begin >= shard.begin && b.range.end() <= shard.end()) << "one shard per bucket";
          } else {
            EXPECT_EQ(b.owner, -1);
          }
          next = b.range.end();
        }
        EXPECT_EQ(next, total);
      }
    }
  }
}

TEST(GradientBuckets, LayersBecomeBucketsReadyAsTheBackwardPassesThem) {
  int64_t n = 0;
  const GradientReadiness r = model_like(3, &n);  // points: 0 LM head, 3 - i layer i, 4 the end
  // Buckets of one layer's matrices or less: the LM head at point 0, each layer at its own point.
  const std::vector<GradientBucket> small = plan_gradient_buckets(n, r, 448, {}, 64);
  std::vector<int> seen;
  for (const GradientBucket& b : small) seen.push_back(b.ready_point);
  for (int p = 0; p <= 4; ++p) EXPECT_NE(std::find(seen.begin(), seen.end(), p), seen.end()) << "point " << p;
  EXPECT_EQ(small.front().ready_point, 0);
  EXPECT_EQ(small.front().range, (FlatRange{(40 + 7 + 10 + 13) * 64 + 40 * 64 - 448, 448}))
      << "the LM head's top, cut to the bucket size";
  // The vectors (after the LM head) never share a bucket with it: they would hold it back to the end.
  for (const GradientBucket& b : small) {
    if (b.range.begin < 110 * 64 && b.range.end() > 110 * 64) ADD_FAILURE() << "a bucket spans the LM head's end";
  }
  // Megatron's default size: everything but the vectors in one bucket, ready at the end.
  const std::vector<GradientBucket> big = plan_gradient_buckets(n, r, default_bucket_size(1), {}, 128);
  ASSERT_EQ(big.size(), 2u);
  EXPECT_EQ(big[0].ready_point, 4);
  EXPECT_EQ(big[1].ready_point, 4);
}

TEST(GradientBuckets, ShardedBucketsSumEachShardIntoItsOwnerExactlyOnce) {
  int64_t n = 0;
  const GradientReadiness r = model_like(4, &n);
  for (const int world : {1, 2, 4, 7}) {
    for (int rank = 0; rank < world; ++rank) {
      const DataParallelLayout l = plan_data_parallel(n, world, rank, true, 300, r, true);
      EXPECT_EQ(l.ready_points, 6);
      EXPECT_TRUE(l.overlap);
      std::vector<int> owner(static_cast<size_t>(l.padded_params), -1);
      for (const GradientBucket& b : l.buckets) {
        for (int64_t i = b.range.begin; i < b.range.end(); ++i) {
          ASSERT_EQ(owner[static_cast<size_t>(i)], -1) << "element " << i << " reduced twice";
          owner[static_cast<size_t>(i)] = b.owner;
        }
      }
      for (int64_t i = 0; i < l.padded_params; ++i) {
        ASSERT_EQ(owner[static_cast<size_t>(i)], static_cast<int>(i / (l.padded_params / world)))
            << "element " << i << " goes to the rank owning it (its shard is unchanged by the buckets)";
      }
    }
  }
}

TEST(GradientBuckets, ClearErrors) {
  int64_t n = 0;
  const GradientReadiness r = model_like(2, &n);
  EXPECT_NE(test::thrown_message([&] { plan_gradient_buckets(n, r, 0, {}, 128); }).find("ddp.bucket_size"),
            std::string::npos);
  EXPECT_NE(test::thrown_message([&] { ready_runs(10, GradientReadiness{2, {{{0, 5}, 1}, {{4, 3}, 0}}}); })
                .find("segment 1 [4, 7)"),
            std::string::npos);
  EXPECT_THROW(ready_runs(10, GradientReadiness{2, {{{0, 5}, 2}}}), Error);   // no such point
  EXPECT_THROW(ready_runs(10, GradientReadiness{2, {{{8, 5}, 0}}}), Error);   // beyond the buffer
  EXPECT_THROW(plan_gradient_buckets(100, r, 10, {{0, 50}, {60, 40}}, 128), Error);  // shards with a hole
}

}  // namespace
}  // namespace sg::dist
