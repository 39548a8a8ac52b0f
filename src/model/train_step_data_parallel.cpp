// TrainStep's data-parallel pieces (dist/gradient_reducer.h): binding the reducer to the step's
// buffers, the optimizer-state downloads that gather every rank's shard, and where each rank's
// microbatches sit in the run's random stream.
//
// RNG: rank r runs the global batch's microbatches [r M, (r+1) M) (M = num_microbatches; data/rank_batch.h),
// so its generators start a step at the run's offset + r M kRngOffsetPerMicrobatch and, after its own M
// advances, skip the other ranks' (dp - 1) M: every microbatch draws what it would at world size 1.
#include "core/error.h"
#include "core/strings.h"
#include "cuda/check.h"
#include "cuda/stream.h"
#include "kernels/grad_norm.h"
#include "model/dropout_sites.h"
#include "model/gradient_readiness.h"
#include "model/train_step.h"

namespace sg::model {

dist::DataParallelLayout TrainStep::data_parallel_layout(const TrainStepOptions& options, int64_t num_params) {
  return options.reducer ? options.reducer->layout() : dist::plan_data_parallel(num_params, 1, 0, false);
}

void TrainStep::bind_reducer() {
  if (reducer_ == nullptr) return;
  const int points = backward_ready_points(static_cast<int64_t>(layers_.size()));
  SG_CHECK(dp_.ready_points == points,
           strprintf("the gradient reducer was planned for %d ready points of the backward; this model's step has %d "
                     "(plan it with model::gradient_readiness of the step's layout)",
                     dp_.ready_points, points));
  dist::ReducerBuffers b;
  b.grads = grads_;
  b.params = params_;
  b.loss = &scalars_->loss;
  b.eval_loss = &scalars_->eval_loss;
  b.norm_partials = grad_norm_partials_;
  b.norm_partials_count = kernels::kGradNormPartials;
  const cuda::Stream stream;
  reducer_->bind(b, stream);
  if (rank_rng_offset() > 0) {
    // The generators start at this rank's first microbatch (load_state re-applies it).
    SG_CUDA_CHECK(cudaDeviceSynchronize());
    rng_.download();
    for (size_t g = 0; g < rng_.size(); ++g) rng_.host_state(g).offset += rank_rng_offset();
    rng_.upload();
    SG_CUDA_CHECK(cudaDeviceSynchronize());
  }
}

uint64_t TrainStep::rank_rng_offset() const {
  return static_cast<uint64_t>(dp_.rank) * static_cast<uint64_t>(batch_.num_microbatches) * kRngOffsetPerMicrobatch;
}

uint64_t TrainStep::other_ranks_rng_offset() const {
  return static_cast<uint64_t>(dp_.world_size - 1) * static_cast<uint64_t>(batch_.num_microbatches) *
         kRngOffsetPerMicrobatch;
}

std::vector<float> TrainStep::download_optimizer_state(cudaStream_t stream, const float* slice) const {
  check_setup_allowed("TrainStep::download_optimizer_state");
  if (!dp_.sharded) {
    std::vector<float> out;
    download_floats(stream, slice, out);
    return out;
  }
  // Every rank's shard into the gradient buffer (free between steps; the next step zeroes or overwrites
  // all of it), in place.
  reducer_->gather_optimizer_slices(slice, grads_, dist::ElementType::f32, stream);
  std::vector<float> out;
  download_floats(stream, grads_, out);
  SG_CUDA_CHECK(cudaMemsetAsync(grads_, 0, static_cast<size_t>(dp_.padded_params) * sizeof(float), stream));
  SG_CUDA_CHECK(cudaStreamSynchronize(stream));
  return out;
}

std::vector<float> TrainStep::download_moment(cudaStream_t stream, const kernels::MomentBuffer& moment) const {
  if (moment.dtype == kernels::MomentDtype::fp32) {
    return download_optimizer_state(stream, static_cast<const float*>(moment.data));
  }
  check_setup_allowed("TrainStep::download_moment");
  // bf16: the bits (every rank's shard gathered into the gradient buffer first, as above), widened here.
  const void* source = moment.data;
  if (dp_.sharded) {
    reducer_->gather_optimizer_slices(moment.data, grads_, dist::ElementType::bf16, stream);
    source = grads_;
  }
  const auto n = static_cast<size_t>(layout_.total());
  std::vector<uint16_t> bits(n);
  SG_CUDA_CHECK(cudaMemcpyAsync(bits.data(), source, n * sizeof(uint16_t), cudaMemcpyDeviceToHost, stream));
  if (dp_.sharded) {
    SG_CUDA_CHECK(cudaMemsetAsync(grads_, 0, static_cast<size_t>(dp_.padded_params) * sizeof(float), stream));
  }
  SG_CUDA_CHECK(cudaStreamSynchronize(stream));
  std::vector<float> out(n);
  for (size_t i = 0; i < n; ++i) out[i] = bf16_bits_to_float(bits[i]);
  return out;
}

}  // namespace sg::model
