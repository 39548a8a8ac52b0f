#include "dist/sharding.h"

#include <algorithm>

#include "core/error.h"
#include "core/strings.h"

namespace sg::dist {

int64_t default_bucket_size(int world_size) {
  return std::max<int64_t>(40'000'000, int64_t{1'000'000} * std::max(world_size, 1));
}

int64_t padded_size(int64_t n, int world_size, int64_t alignment) {
  SG_CHECK(n >= 0 && world_size >= 1 && alignment >= 1,
           strprintf("padded_size: n = %lld, world_size = %d, alignment = %lld", static_cast<long long>(n),
                     world_size, static_cast<long long>(alignment)));
  const int64_t unit = alignment * world_size;
  const int64_t units = std::max<int64_t>(1, (n + unit - 1) / unit);
  return units * unit;
}

FlatRange shard_range(int64_t padded, int world_size, int rank) {
  SG_CHECK(world_size >= 1 && rank >= 0 && rank < world_size && padded % world_size == 0,
           strprintf("shard_range: %lld elements over world size %d, rank %d", static_cast<long long>(padded),
                     world_size, rank));
  const int64_t shard = padded / world_size;
  return {rank * shard, shard};
}

DataParallelLayout plan_data_parallel(int64_t num_params, int world_size, int rank, bool sharded,
                                      int64_t bucket_size, const GradientReadiness& readiness, bool overlap) {
  SG_CHECK(world_size >= 1, strprintf("data-parallel world size %d must be at least 1", world_size));
  SG_CHECK(rank >= 0 && rank < world_size,
           strprintf("data-parallel rank %d is outside [0, %d)", rank, world_size));
  SG_CHECK(num_params >= 0, "the flat parameter count must not be negative");
  DataParallelLayout l;
  l.world_size = world_size;
  l.rank = rank;
  l.sharded = sharded;
  l.num_params = num_params;
  l.overlap = overlap;
  l.ready_points = readiness.points;
  std::vector<FlatRange> shards;
  if (sharded) {
    l.padded_params = padded_size(num_params, world_size);
    l.owned = shard_range(l.padded_params, world_size, rank);
    for (int r = 0; r < world_size; ++r) shards.push_back(shard_range(l.padded_params, world_size, r));
  } else {
    l.padded_params = num_params;
    l.owned = {0, num_params};
  }
  l.buckets = plan_gradient_buckets(l.padded_params, readiness,
                                    bucket_size > 0 ? bucket_size : default_bucket_size(world_size), shards,
                                    kShardAlignment);
  return l;
}

std::string DataParallelLayout::describe() const {
  const std::string reduction =
      describe_buckets(buckets, ready_points) +
      (overlap ? ", overlapped with the backward" : ", after the backward (ddp.overlap_grad_reduce=false)");
  if (!sharded) {
    return strprintf("data parallel %d (rank %d): gradients all-reduced in %s; optimizer over all %lld parameters",
                     world_size, rank, reduction.c_str(), static_cast<long long>(num_params));
  }
  return strprintf("data parallel %d (rank %d), distributed optimizer: gradients reduce-scattered (%s); this rank "
                   "owns [%lld, %lld) of %lld padded elements (%lld parameters); bf16 weights all-gathered",
                   world_size, rank,
                   overlap ? ("each bucket summed into its shard's rank: " + reduction).c_str()
                           : "one call after the backward",
                   static_cast<long long>(owned.begin),
                   static_cast<long long>(owned.end()), static_cast<long long>(padded_params),
                   static_cast<long long>(num_params));
}

int64_t decayed_elements_in(const FlatRange& owned, int64_t n_decay) {
  return std::clamp<int64_t>(n_decay - owned.begin, 0, owned.size);
}

std::vector<float> owned_slice(const std::vector<float>& full, const DataParallelLayout& layout) {
  SG_CHECK(static_cast<int64_t>(full.size()) == layout.num_params,
           strprintf("a full parameter vector has %zu values; the model has %lld", full.size(),
                     static_cast<long long>(layout.num_params)));
  std::vector<float> out(static_cast<size_t>(layout.owned.size), 0.0f);
  const int64_t end = std::min(layout.owned.end(), layout.num_params);
  for (int64_t i = layout.owned.begin; i < end; ++i) out[static_cast<size_t>(i - layout.owned.begin)] = full[static_cast<size_t>(i)];
  return out;
}

std::vector<float> assemble_from_slices(const std::vector<std::vector<float>>& slices,
                                        const std::vector<DataParallelLayout>& layouts) {
  SG_CHECK(!layouts.empty() && slices.size() == layouts.size(),
           strprintf("assemble_from_slices: %zu slices for %zu layouts", slices.size(), layouts.size()));
  const int64_t n = layouts.front().num_params;
  std::vector<float> staging(static_cast<size_t>(layouts.front().padded_params), 0.0f);
  for (size_t r = 0; r < layouts.size(); ++r) {
    const DataParallelLayout& l = layouts[r];
    SG_CHECK(l.num_params == n && l.padded_params == static_cast<int64_t>(staging.size()) &&
                 l.rank == static_cast<int>(r) && static_cast<int64_t>(slices[r].size()) == l.owned.size,
             strprintf("assemble_from_slices: rank %zu's slice or layout does not match the others", r));
    std::copy(slices[r].begin(), slices[r].end(), staging.begin() + l.owned.begin);
  }
  staging.resize(static_cast<size_t>(n));
  return staging;
}

}  // namespace sg::dist
