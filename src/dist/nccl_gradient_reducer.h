#pragma once
// GradientReducer over an NCCL communicator (dist/gradient_reducer.h):
//   all-reduce mode   one in-place ncclAllReduce per bucket (layout().buckets), last bucket first — the
//                     order the backward finishes them, ready for overlapping them with it later
//   sharded mode      one in-place ncclReduceScatter of the padded gradients (rank r's shard receives
//                     the sum), ncclAllReduce of the norm partials, in-place ncclAllGather of the bf16
//                     weights
// plus one ncclAllReduce of the loss scalar. Sums of two values are exact whatever NCCL's algorithm, so
// at world size 2 a captured step is bitwise equal to an eager one; beyond 2, NCCL must pick the same
// algorithm in both (NCCL_ALGO=Ring NCCL_PROTO=Simple pins it; docs/distributed.md).
#include "dist/communicator.h"
#include "dist/gradient_reducer.h"

namespace sg::dist {

class NcclGradientReducer final : public GradientReducer {
 public:
  // `communicator` must outlive the reducer; layout.world_size/rank must match it.
  NcclGradientReducer(Communicator& communicator, DataParallelLayout layout);

  const DataParallelLayout& layout() const override { return layout_; }
  void bind(const ReducerBuffers& buffers, cudaStream_t stream) override;
  void reduce_gradients(cudaStream_t stream) override;
  void reduce_norm_partials(cudaStream_t stream) override;
  void gather_weights(cudaStream_t stream) override;
  void reduce_eval_loss(cudaStream_t stream) override;
  void gather_optimizer_slices(const float* shard, float* staging, cudaStream_t stream) override;

 private:
  void check_bound() const;
  Communicator& comm_;
  DataParallelLayout layout_;
  ReducerBuffers buffers_;
};

}  // namespace sg::dist
