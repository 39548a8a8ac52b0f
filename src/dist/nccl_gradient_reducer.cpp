#include "dist/nccl_gradient_reducer.h"

#include <algorithm>

#include "core/error.h"
#include "core/strings.h"
#include "cuda/arena.h"
#include "cuda/check.h"

namespace sg::dist {

NcclGradientReducer::NcclGradientReducer(Communicator& communicator, DataParallelLayout layout)
    : comm_(communicator), layout_(std::move(layout)) {
  SG_CHECK(layout_.world_size == comm_.world_size() && layout_.rank == comm_.rank(),
           strprintf("gradient reducer: layout for rank %d of %d, communicator is rank %d of %d", layout_.rank,
                     layout_.world_size, comm_.rank(), comm_.world_size()));
  point_begin_.assign(static_cast<size_t>(layout_.ready_points) + 1, 0);
  for (size_t b = 0; b < layout_.buckets.size(); ++b) {
    const int p = layout_.buckets[b].ready_point;
    SG_CHECK(p >= 0 && p < layout_.ready_points && (b == 0 || layout_.buckets[b - 1].ready_point <= p),
             "gradient reducer: the buckets are not in launch order (dist/gradient_buckets.h)");
    point_begin_[static_cast<size_t>(p) + 1] = b + 1;
  }
  for (size_t p = 1; p < point_begin_.size(); ++p) point_begin_[p] = std::max(point_begin_[p], point_begin_[p - 1]);
}

void NcclGradientReducer::check_bound() const {
  SG_CHECK(buffers_.grads != nullptr && buffers_.params != nullptr && buffers_.losses != nullptr &&
               buffers_.eval_loss_sums != nullptr && buffers_.norm_partials != nullptr,
           "NcclGradientReducer used before bind(): the step binds its buffers when it plans its memory");
}

void* NcclGradientReducer::grads_at(int64_t element) const {
  const size_t element_bytes = buffers_.grad_type == ElementType::bf16 ? sizeof(uint16_t) : sizeof(float);
  return static_cast<char*>(buffers_.grads) + static_cast<size_t>(element) * element_bytes;
}

void NcclGradientReducer::bind(const ReducerBuffers& buffers, cudaStream_t stream) {
  cuda::check_host_sync_allowed("NcclGradientReducer::bind");
  buffers_ = buffers;
  check_bound();
  SG_CHECK(buffers_.grad_type == ElementType::f32 || buffers_.grad_type == ElementType::bf16,
           "NcclGradientReducer: the main gradients are f32 or bf16");
  if (layout_.overlap && !reduce_stream_) {
    reduce_stream_ = std::make_unique<cuda::Stream>();
    point_passed_ = std::make_unique<cuda::Event>();
    buckets_done_ = std::make_unique<cuda::Event>();
  }
  // Every collective of a step, once, so NCCL connects its channels now (not inside a capture).
  for (int p = 0; p < layout_.ready_points; ++p) gradients_ready(p, stream);
  reduce_gradients(stream);
  reduce_norm_partials(stream);
  gather_weights(stream);
  reduce_eval_loss(stream);
  SG_CUDA_CHECK(cudaStreamSynchronize(stream));
  comm_.check_async_error();
}

void NcclGradientReducer::reduce_bucket(const GradientBucket& bucket, cudaStream_t stream) {
  void* at = grads_at(bucket.range.begin);
  const auto count = static_cast<size_t>(bucket.range.size);
  if (bucket.owner < 0) {
    comm_.all_reduce_sum(at, at, count, buffers_.grad_type, stream);
  } else {
    comm_.reduce_sum(at, at, count, buffers_.grad_type, bucket.owner, stream);
  }
}

void NcclGradientReducer::gradients_ready(int point, cudaStream_t stream) {
  check_bound();
  SG_CHECK(point == next_point_ && point < layout_.ready_points,
           strprintf("gradient reducer: the step reported ready point %d, expected %d of %d (every point once per "
                     "step, in order; model/gradient_readiness.h)",
                     point, next_point_, layout_.ready_points));
  ++next_point_;
  const auto p = static_cast<size_t>(point);
  if (!layout_.overlap || point_begin_[p] == point_begin_[p + 1]) return;
  // Fork: the reducer's stream continues once `stream` passed this point (inside a capture this makes
  // the reducer's stream part of it, until reduce_gradients joins it back).
  point_passed_->record(stream);
  reduce_stream_->wait(*point_passed_);
  for (size_t b = point_begin_[p]; b < point_begin_[p + 1]; ++b) reduce_bucket(layout_.buckets[b], *reduce_stream_);
  forked_ = true;
}

void NcclGradientReducer::reduce_gradients(cudaStream_t stream) {
  check_bound();
  SG_CHECK(next_point_ == layout_.ready_points,
           strprintf("gradient reducer: the step reported %d of its %d ready points before reducing the gradients "
                     "(model/gradient_readiness.h)",
                     next_point_, layout_.ready_points));
  next_point_ = 0;
  if (!layout_.overlap && layout_.sharded) {
    // After the backward one reduce-scatter is cheaper than the buckets' reduces into their owners (a
    // reduce sends each bucket one way; the reduce-scatter splits the traffic over both directions).
    const FlatRange& own = layout_.owned;
    comm_.reduce_scatter_sum(buffers_.grads, grads_at(own.begin), static_cast<size_t>(own.size), buffers_.grad_type,
                             stream);
  } else if (!layout_.overlap) {
    for (const GradientBucket& bucket : layout_.buckets) reduce_bucket(bucket, stream);
  } else if (forked_) {
    buckets_done_->record(*reduce_stream_);  // join: nothing after this reads a gradient too early
    SG_CUDA_CHECK(cudaStreamWaitEvent(stream, *buckets_done_, 0));
    forked_ = false;
  }
  comm_.all_reduce_sum(buffers_.losses, buffers_.losses, static_cast<size_t>(buffers_.losses_count), ElementType::f32,
                       stream);
  if (buffers_.step_counts_count > 0) {
    comm_.all_reduce_sum(buffers_.step_counts, buffers_.step_counts, static_cast<size_t>(buffers_.step_counts_count),
                         ElementType::i32, stream);
  }
}

void NcclGradientReducer::reduce_norm_partials(cudaStream_t stream) {
  check_bound();
  if (!layout_.sharded) return;
  comm_.all_reduce_sum(buffers_.norm_partials, buffers_.norm_partials, static_cast<size_t>(buffers_.norm_partials_count),
                       ElementType::f64, stream);
}

void NcclGradientReducer::gather_weights(cudaStream_t stream) {
  check_bound();
  if (!layout_.sharded) return;
  auto* params = static_cast<uint16_t*>(buffers_.params);  // bf16 elements
  const FlatRange& own = layout_.owned;
  comm_.all_gather(params + own.begin, params, static_cast<size_t>(own.size), ElementType::bf16, stream);
  if (buffers_.fp32_replica_count > 0) {
    // One rank holds each value, the others zero: an integer sum of the bits is exact (no -0 + 0 = +0).
    comm_.all_reduce_sum(buffers_.fp32_replica, buffers_.fp32_replica, static_cast<size_t>(buffers_.fp32_replica_count),
                         ElementType::i32, stream);
  }
}

void NcclGradientReducer::reduce_eval_loss(cudaStream_t stream) {
  check_bound();
  comm_.all_reduce_sum(buffers_.eval_loss_sums, buffers_.eval_loss_sums, 2, ElementType::f64, stream);
}

void NcclGradientReducer::gather_optimizer_slices(const void* shard, void* staging, ElementType type,
                                                  cudaStream_t stream) {
  cuda::check_host_sync_allowed("NcclGradientReducer::gather_optimizer_slices");
  SG_CHECK(type == ElementType::f32 || type == ElementType::bf16,
           "gather_optimizer_slices: optimizer state is f32 or bf16");
  const size_t element_bytes = type == ElementType::f32 ? sizeof(float) : sizeof(uint16_t);
  const FlatRange& own = layout_.owned;
  const size_t count = static_cast<size_t>(own.size);
  auto* staging_bytes = static_cast<char*>(staging);
  if (!layout_.sharded) {
    if (shard != staging) {
      SG_CUDA_CHECK(cudaMemcpyAsync(staging, shard, count * element_bytes, cudaMemcpyDeviceToDevice, stream));
    }
  } else {
    char* own_in_staging = staging_bytes + static_cast<size_t>(own.begin) * element_bytes;
    SG_CUDA_CHECK(cudaMemcpyAsync(own_in_staging, shard, count * element_bytes, cudaMemcpyDeviceToDevice, stream));
    comm_.all_gather(own_in_staging, staging, count, type, stream);
  }
  SG_CUDA_CHECK(cudaStreamSynchronize(stream));
  comm_.check_async_error();
}

}  // namespace sg::dist
