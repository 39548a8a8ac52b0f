// kernels/fp32_replica against its CPU twin (reference/fp32_replica.h), bitwise (both only move values): the
// replica filled from a shard writes every element (poisoned before: NaN), the owned values and zeros elsewhere;
// writing back changes exactly the owned elements of the shard. Packings of 1 to 5000 elements with gaps, owned
// ranges that hold nothing, everything, or cut blocks; n = 0 launches nothing.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "core/error.h"
#include "cuda/stream.h"
#include "gpu_test_util.h"
#include "kernel_gpu_test_util.h"
#include "kernels/fp32_replica.h"
#include "reference/fp32_replica.h"

namespace {

using namespace sg;
using namespace sg::test;

// `n` packed elements in blocks of `block` with a gap of `gap` after each, the blocks at flat offsets 3 apart.
std::vector<int64_t> packing(int64_t n, int64_t block, int64_t gap) {
  std::vector<int64_t> out;
  int64_t flat = 17;
  while (static_cast<int64_t>(out.size()) < n) {
    for (int64_t i = 0; i < block && static_cast<int64_t>(out.size()) < n; ++i) out.push_back(flat++);
    for (int64_t i = 0; i < gap && static_cast<int64_t>(out.size()) < n; ++i) out.push_back(-1);
    flat += 3;
  }
  return out;
}

struct Owned {
  int64_t begin, size;
};

TEST(Fp32ReplicaGpu, MatchesTheCpuTwinBitwise) {
  cuda::Stream stream;
  for (const int64_t n : {1, 300, 5000}) {
    const std::vector<int64_t> offsets = packing(n, 70, 58);
    const int64_t flat_end = 17 + n + 3 * n;  // past every offset
    for (const Owned owned : {Owned{0, 0}, Owned{0, flat_end}, Owned{40, 90}, Owned{flat_end / 2, flat_end}}) {
      SCOPED_TRACE(testing::Message() << "n " << n << ", owned [" << owned.begin << ", +" << owned.size << ")");
      const std::vector<float> shard = random_normal(static_cast<size_t>(owned.size), 11 + n);
      const std::vector<float> replica_in = random_normal(static_cast<size_t>(n), 12 + n);
      DeviceBuffer<int64_t> d_offsets(offsets.size());
      DeviceBuffer<float> d_shard(shard.size()), d_replica(offsets.size());
      d_offsets.upload(offsets);
      d_shard.upload(shard);
      d_replica.poison();
      const kernels::Fp32ReplicaParams params{.replica = d_replica.get(),
                                              .shard = d_shard.get(),
                                              .flat_offsets = d_offsets.get(),
                                              .n = n,
                                              .owned_begin = owned.begin,
                                              .owned_size = owned.size};
      kernels::fp32_replica_from_shard(stream, params);
      std::vector<float> expected(static_cast<size_t>(n));
      ref::fp32_replica_from_shard(expected.data(), shard.data(), offsets.data(), n, owned.begin, owned.size);
      EXPECT_TRUE(bitwise_equal(d_replica.download(), expected));

      d_replica.upload(replica_in);
      kernels::fp32_replica_to_shard(stream, params);
      std::vector<float> shard_expected = shard;
      ref::fp32_replica_to_shard(shard_expected.data(), replica_in.data(), offsets.data(), n, owned.begin, owned.size);
      EXPECT_TRUE(bitwise_equal(d_shard.download(), shard_expected));
    }
  }
}

TEST(Fp32ReplicaGpu, NothingForAnEmptyReplicaAndNegativeSizesThrow) {
  cuda::Stream stream;
  kernels::fp32_replica_from_shard(stream, {});
  kernels::fp32_replica_to_shard(stream, {});
  SG_CUDA_CHECK(cudaStreamSynchronize(stream));
  EXPECT_THROW(kernels::fp32_replica_from_shard(stream, {.n = -1}), Error);
}

}  // namespace
