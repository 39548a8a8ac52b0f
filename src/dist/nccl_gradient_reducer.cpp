#include "dist/nccl_gradient_reducer.h"

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
}

void NcclGradientReducer::check_bound() const {
  SG_CHECK(buffers_.grads != nullptr && buffers_.params != nullptr && buffers_.loss != nullptr &&
               buffers_.eval_loss != nullptr && buffers_.norm_partials != nullptr,
           "NcclGradientReducer used before bind(): the step binds its buffers when it plans its memory");
}

void NcclGradientReducer::bind(const ReducerBuffers& buffers, cudaStream_t stream) {
  cuda::check_host_sync_allowed("NcclGradientReducer::bind");
  buffers_ = buffers;
  check_bound();
  // Every collective of a step, once, so NCCL connects its channels now (not inside a capture).
  reduce_gradients(stream);
  reduce_norm_partials(stream);
  gather_weights(stream);
  reduce_eval_loss(stream);
  SG_CUDA_CHECK(cudaStreamSynchronize(stream));
  comm_.check_async_error();
}

void NcclGradientReducer::reduce_gradients(cudaStream_t stream) {
  check_bound();
  if (layout_.sharded) {
    const FlatRange& own = layout_.owned;
    comm_.reduce_scatter_sum(buffers_.grads, buffers_.grads + own.begin, static_cast<size_t>(own.size),
                             ElementType::f32, stream);
  } else {
    for (auto it = layout_.buckets.rbegin(); it != layout_.buckets.rend(); ++it) {
      comm_.all_reduce_sum(buffers_.grads + it->begin, buffers_.grads + it->begin, static_cast<size_t>(it->size),
                           ElementType::f32, stream);
    }
  }
  comm_.all_reduce_sum(buffers_.loss, buffers_.loss, 1, ElementType::f32, stream);
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
}

void NcclGradientReducer::reduce_eval_loss(cudaStream_t stream) {
  check_bound();
  comm_.all_reduce_sum(buffers_.eval_loss, buffers_.eval_loss, 1, ElementType::f32, stream);
}

void NcclGradientReducer::gather_optimizer_slices(const float* shard, float* staging, cudaStream_t stream) {
  cuda::check_host_sync_allowed("NcclGradientReducer::gather_optimizer_slices");
  const FlatRange& own = layout_.owned;
  if (!layout_.sharded) {
    if (shard != staging) {
      SG_CUDA_CHECK(cudaMemcpyAsync(staging, shard, static_cast<size_t>(own.size) * sizeof(float),
                                    cudaMemcpyDeviceToDevice, stream));
    }
  } else {
    SG_CUDA_CHECK(cudaMemcpyAsync(staging + own.begin, shard, static_cast<size_t>(own.size) * sizeof(float),
                                  cudaMemcpyDeviceToDevice, stream));
    comm_.all_gather(staging + own.begin, staging, static_cast<size_t>(own.size), ElementType::f32, stream);
  }
  SG_CUDA_CHECK(cudaStreamSynchronize(stream));
  comm_.check_async_error();
}

}  // namespace sg::dist
