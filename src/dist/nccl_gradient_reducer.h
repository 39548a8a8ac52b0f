#pragma once
// GradientReducer over an NCCL communicator (dist/gradient_reducer.h):
//   gradients         one in-place ncclAllReduce per bucket (layout().buckets, dist/gradient_buckets.h)
//                     in launch order; with the distributed optimizer one in-place ncclReduceScatter of
//                     the padded buffer, or with overlap one in-place ncclReduce per bucket into the rank
//                     whose shard holds it (the buckets never span two shards, so together they are that
//                     reduce-scatter: the same shards, the same sums at 2 ranks)
//   overlap           (ddp.overlap_grad_reduce) the buckets of each ready point are launched on the
//                     reducer's own stream once the step's stream passed that point (an event; inside a
//                     capture the graph forks there), and the step's stream waits for that stream
//                     (joins) before the grad norm: the same data, only earlier
//   sharded mode      also ncclAllReduce of the norm partials, in-place ncclAllGather of the bf16 weights
// plus one ncclAllReduce of the loss scalar. Sums of two values are exact whatever NCCL's algorithm, so
// at world size 2 a captured step is bitwise equal to an eager one; beyond 2, NCCL must pick the same
// algorithm in both (NCCL_ALGO=Ring NCCL_PROTO=Simple pins it; docs/distributed.md).
#include <memory>
#include <vector>

#include "cuda/stream.h"
#include "dist/communicator.h"
#include "dist/gradient_reducer.h"

namespace sg::dist {

class NcclGradientReducer final : public GradientReducer {
 public:
  // `communicator` must outlive the reducer; layout.world_size/rank must match it.
  NcclGradientReducer(Communicator& communicator, DataParallelLayout layout);

  const DataParallelLayout& layout() const override { return layout_; }
  void bind(const ReducerBuffers& buffers, cudaStream_t stream) override;
  void gradients_ready(int point, cudaStream_t stream) override;
  void reduce_gradients(cudaStream_t stream) override;
  void reduce_norm_partials(cudaStream_t stream) override;
  void gather_weights(cudaStream_t stream) override;
  void reduce_eval_loss(cudaStream_t stream) override;
  void gather_optimizer_slices(const void* shard, void* staging, ElementType type, cudaStream_t stream) override;

 private:
  void check_bound() const;
  void reduce_bucket(const GradientBucket& bucket, cudaStream_t stream);
  void* grads_at(int64_t element) const;  // the main_grad from `element` on (its ReducerBuffers::grad_type)
  Communicator& comm_;
  DataParallelLayout layout_;
  ReducerBuffers buffers_;
  std::vector<size_t> point_begin_;  // [ready_points + 1]: the buckets of point p are [point_begin_[p], point_begin_[p+1])
  // Overlap (made in bind: they need the device): the reducer's stream, the step's "point passed"
  // event it waits on, and its own "buckets done" event the step's stream waits on.
  std::unique_ptr<cuda::Stream> reduce_stream_;
  std::unique_ptr<cuda::Event> point_passed_, buckets_done_;
  int next_point_ = 0;  // the ready point the step reports next in this step
  bool forked_ = false;  // the reducer's stream has work of this step the step's stream has not joined
};

}  // namespace sg::dist
