#pragma once
// The training step's data-parallel hook. The step (model/) owns the flat buffers and calls these on
// its own stream at fixed points, so with a full-iteration graph the collectives are captured inside
// it, and with transformer_engine scopes they run eagerly between the region replays:
//
//   zero grads; for each microbatch: forward, backward (weight gradients added into main_grad)
//     in the last microbatch's backward, at each ready point (dist/gradient_buckets.h):
//     gradients_ready     with ddp.overlap_grad_reduce: the buckets the backward just completed are
//                         reduced on the reducer's own stream, overlapped with the rest of the backward
//   reduce_gradients      grads (padded_params values) summed over ranks: all of them (all-reduce in
//                         buckets) or this rank's shard (reduce-scatter); with overlap only the join of
//                         the reducer's stream; then the step's losses and the layers' step counts (the
//                         MoE tokens per expert, which step_end's expert-bias update reads) summed over ranks
//   grad norm stage 1     per-block sums of squares over the owned range
//   reduce_norm_partials  those partial sums summed over ranks (sharded only: otherwise every rank
//                         already holds every gradient and its norm is the global one)
//   grad norm stage 2 with the step's other optimizer scalars (kernels/optimizer_step_scalars.h), then
//                         AdamW over the owned range
//   gather_weights        the updated bf16 weights of every shard on every rank (sharded only); then the
//                         replica of the fp32 weights the forward reads (kernels/fp32_replica.h), where
//                         each rank put its owned elements and zeros: summed as int32 bit patterns, so
//                         every element becomes its owner's value exactly
// and in the forward-only evaluation (each rank evaluates its rows of every validation batch):
//   reduce_eval_loss      eval_loss_sums (token loss sum, token count) summed over ranks
//
// The losses (and the MoE auxiliary losses' gradients) are pre-scaled by 1 / (microbatches x data-parallel
// size) in the step, so sums over ranks are the global means, and a step at world size N adds the same terms
// as at world size 1, in another order. The step counts are integers: their sum is exact.
#include <cuda_runtime.h>

#include <cstdint>

#include "dist/communicator.h"  // ElementType
#include "dist/sharding.h"

namespace sg::dist {

// The step's buffers the collectives touch; fixed for the life of the step (arena addresses).
struct ReducerBuffers {
  void* grads = nullptr;           // [padded_params] main_grad of grad_type (f32, or bf16 with
                                   // ddp.grad_reduce_in_fp32=false: then reduced in bf16, as Megatron does)
  ElementType grad_type = ElementType::f32;
  void* params = nullptr;          // [padded_params] bf16 compute weights
  float* losses = nullptr;         // the step's device loss scalars: MoE aux loss, z-loss, loss
  int64_t losses_count = 0;
  int32_t* step_counts = nullptr;    // the layers' per-step counts (model/layer_context.h), one array
  int64_t step_counts_count = 0;     //   (0: the model has none)
  double* eval_loss_sums = nullptr;  // the evaluation's device token loss sum and token count [2]
  double* norm_partials = nullptr; // the grad norm's per-block partial sums
  int64_t norm_partials_count = 0;
  void* fp32_replica = nullptr;  // sharded only: the replicated fp32 weights (as int32 bits), or null
  int64_t fp32_replica_count = 0;
};

class GradientReducer {
 public:
  virtual ~GradientReducer() = default;
  virtual const DataParallelLayout& layout() const = 0;

  // Binds the step's buffers, then runs every collective once, synchronously, on `stream`: NCCL sets up
  // its connections lazily, and that must happen outside steps and captures. Called once the buffers
  // are zeroed and before the weights are uploaded (so the in-place all-gather of identical zeros and
  // the all-reduce of zero gradients change nothing).
  virtual void bind(const ReducerBuffers& buffers, cudaStream_t stream) = 0;

  // The backward of the step's LAST microbatch passed ready point `point` (every point 0 ..
  // layout().ready_points - 1 once per step, in order; model/gradient_readiness.h). With overlap, the
  // reducer's stream waits for `stream` here (an event: inside a stream capture this forks the graph,
  // and reduce_gradients joins it) and reduces the buckets of that point. Without overlap: nothing.
  virtual void gradients_ready(int point, cudaStream_t stream) = 0;
  // After the backward: without overlap every bucket in launch order on `stream` (sharded: one
  // reduce-scatter); with overlap `stream` waits for the reducer's stream. Then the loss.
  virtual void reduce_gradients(cudaStream_t stream) = 0;
  virtual void reduce_norm_partials(cudaStream_t stream) = 0;
  virtual void gather_weights(cudaStream_t stream) = 0;
  virtual void reduce_eval_loss(cudaStream_t stream) = 0;

  // Outside steps (checkpoints; every rank must call it): the full vector assembled from every rank's
  // optimizer slice `shard` (layout().owned.size elements of `type`: f32, or bf16 for a bf16 Adam moment)
  // into `staging` (padded_params elements, e.g. the fp32 gradient buffer, free between steps). Synchronous.
  virtual void gather_optimizer_slices(const void* shard, void* staging, ElementType type, cudaStream_t stream) = 0;
};

}  // namespace sg::dist
