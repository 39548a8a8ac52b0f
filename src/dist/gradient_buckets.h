#pragma once
// The gradient buckets of data parallelism: contiguous ranges of the flat fp32 gradient buffer, each
// reduced by one NCCL call, and the point of the backward after which each may be reduced (Megatron's
// bucketing for overlap_grad_reduce). Pure functions, CPU-tested (tests/dist/gradient_buckets_test.cpp).
//
// Ready points number the moments of the LAST microbatch's backward at which gradients become final,
// in the order the backward passes them (the model says which elements each point completes:
// model/gradient_readiness.h). The step tells the reducer when it passed each point; a bucket is
// reduced once the backward passed its ready point — overlapped with the rest of the backward on a
// communication stream (ddp.overlap_grad_reduce), or all after the backward, in the same order with
// the same calls (all-reduce; with the distributed optimizer one reduce-scatter after the backward).
#include <cstdint>
#include <string>
#include <vector>

#include "dist/flat_range.h"

namespace sg::dist {

struct GradientSegment {
  FlatRange range;
  int ready_point = 0;
  bool operator==(const GradientSegment&) const = default;
};

// When each element of the flat gradient buffer is final.
struct GradientReadiness {
  int points = 1;  // ready points 0 .. points - 1; the last one is the end of the backward
  // Ascending, disjoint. An element outside every segment (an alignment gap or the distributed
  // optimizer's padding: never written, zero) takes the ready point of the segment below it (of the
  // first segment below all of them); no segments at all: everything is ready at the last point.
  std::vector<GradientSegment> segments;
};

struct GradientBucket {
  FlatRange range;
  int ready_point = 0;  // the latest ready point of its elements
  int owner = -1;       // distributed optimizer: the rank whose shard holds it (reduced to it); -1: all-reduce
  bool operator==(const GradientBucket&) const = default;
};

// Buckets tiling [0, total), in launch order: by ready point, and within one from the highest address
// down. Built walking the buffer from its end down (the backward's order where the layout is in
// reverse layer order), Megatron-style: runs of elements are merged into a bucket until it holds
// bucket_size elements (rounded up to `alignment`; a longer run is split at multiples of `alignment`),
// and a bucket is closed where the walk meets elements of an EARLIER ready point than the bucket's
// (merging them would hold those back) or, with `shards` (the distributed optimizer's, ascending and
// tiling [0, total)), at every shard boundary: each bucket then lies in one rank's shard (`owner`).
// A bucket's ready point is the latest of its elements'. Throws sg::Error for a bad argument (naming it).
std::vector<GradientBucket> plan_gradient_buckets(int64_t total, const GradientReadiness& readiness,
                                                  int64_t bucket_size, const std::vector<FlatRange>& shards,
                                                  int64_t alignment);

// The ready point of every element of [0, total) as runs (readiness with the gaps filled as above),
// ascending and tiling [0, total). For tests and the planner.
std::vector<GradientSegment> ready_runs(int64_t total, const GradientReadiness& readiness);

// "12 buckets over 9 ready points (3 at the end of the backward)".
std::string describe_buckets(const std::vector<GradientBucket>& buckets, int points);

}  // namespace sg::dist
