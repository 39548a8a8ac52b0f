#pragma once
// The arithmetic of data parallelism over the model's ONE flat parameter buffer (model/param_builder.h):
// which elements each rank reduces, owns and updates. Pure functions, no CUDA, no NCCL, so every bound
// is tested on the CPU (tests/dist/sharding_test.cpp).
//
// Without the distributed optimizer every rank keeps the whole buffer: the gradients are all-reduced in
// buckets (dist/gradient_buckets.h) and every rank runs AdamW over all n elements.
//
// With the distributed optimizer (optimizer.use_distributed_optimizer, Megatron's ZeRO-1) the flat
// buffers of parameters and gradients are padded to P = n rounded up to a multiple of
// world_size * kShardAlignment, and rank r owns the contiguous shard [r S, (r+1) S), S = P / world_size:
//   reduce-scatter  gradients (in place: rank r's shard of the buffer receives the sum over ranks); with
//                   overlap bucketed: every bucket lies in one shard and is summed into its owner (ncclReduce)
//   grad norm       sum of squares over the own shard, summed over ranks, then sqrt (global norm)
//   AdamW           over the own shard only; fp32 master weights and both moments hold S elements
//   all-gather      of the updated bf16 weights (in place), so every rank has the whole model again
// The padding elements are zero in every buffer and stay zero (zero gradient -> zero update), so they
// change no norm and no weight. Every shard starts at a multiple of kShardAlignment elements (512-byte
// aligned fp32, 256-byte bf16): NCCL's in-place collectives and the vectorised kernels see aligned
// pointers on every rank.
#include <cstdint>
#include <string>
#include <vector>

#include "dist/flat_range.h"
#include "dist/gradient_buckets.h"

namespace sg::dist {

inline constexpr int64_t kShardAlignment = 128;  // elements

// Megatron's default bucket size (ddp.bucket_size null): max(40M, 1M * dp) elements.
int64_t default_bucket_size(int world_size);

struct DataParallelLayout {
  int world_size = 1;
  int rank = 0;
  bool sharded = false;        // distributed optimizer
  int64_t num_params = 0;      // n: the model's flat parameter count
  int64_t padded_params = 0;   // length of the flat parameter and gradient buffers (n when not sharded)
  FlatRange owned;             // what this rank's optimizer updates: its shard, or [0, n)
  // The gradient buckets tiling [0, padded_params), in launch order (dist/gradient_buckets.h): all-reduced,
  // or (sharded) each summed into the rank whose shard holds it.
  std::vector<GradientBucket> buckets;
  int ready_points = 1;  // the backward's ready points the buckets refer to
  bool overlap = false;  // ddp.overlap_grad_reduce: each bucket reduced as soon as the backward passed its point

  // Optimizer-state elements this rank keeps (fp32 master weights, exp_avg, exp_avg_sq): owned.size.
  int64_t optimizer_elements() const { return owned.size; }
  // One line: "data parallel 2 (rank 0), distributed optimizer: shard [0, 1024) of 2048 (n 2000)".
  std::string describe() const;
};

// P: n rounded up to a multiple of world_size * alignment (>= alignment * world_size when n = 0).
int64_t padded_size(int64_t n, int world_size, int64_t alignment = kShardAlignment);
// Rank `rank`'s shard of a buffer of `padded` elements split in `world_size` equal parts.
FlatRange shard_range(int64_t padded, int world_size, int rank);
// The whole layout; bucket_size <= 0 means default_bucket_size(world_size); `readiness` says when the
// backward finishes each gradient (the model's, model/gradient_readiness.h; default: all at its end).
// Throws sg::Error for a world size < 1, a rank outside [0, world_size) or a negative n.
DataParallelLayout plan_data_parallel(int64_t num_params, int world_size, int rank, bool sharded,
                                      int64_t bucket_size = 0, const GradientReadiness& readiness = {},
                                      bool overlap = false);

// How many of the weight-decayed elements [0, n_decay) of the flat buffer fall into `owned`, counted from
// its start (AdamW decays the first n_decay elements of the range it is given).
int64_t decayed_elements_in(const FlatRange& owned, int64_t n_decay);

// ---- host-side model of the checkpoint gather / scatter ----
// Scatter (load at any world size): rank `layout.rank`'s optimizer slice of a full n-element vector
// (owned.size elements; padding positions zero).
std::vector<float> owned_slice(const std::vector<float>& full, const DataParallelLayout& layout);
// Gather (save): the full n-element vector from every rank's slice, in rank order — what the in-place
// all-gather of the shards into a padded staging buffer produces, truncated to n.
std::vector<float> assemble_from_slices(const std::vector<std::vector<float>>& slices,
                                        const std::vector<DataParallelLayout>& layouts);

}  // namespace sg::dist
