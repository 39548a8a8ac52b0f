// TrainStep's data-parallel pieces (dist/gradient_reducer.h): binding the reducer to the step's
// buffers, the optimizer-state downloads that gather every rank's shard, and where each rank's
// microbatches sit in the run's random stream, and the weight fingerprints the ranks compare (validation.test_mode).
//
// RNG: rank r runs the global batch's microbatches [r M, (r+1) M) (M = num_microbatches; data/rank_batch.h),
// so its generators start a step at the run's offset + r M kRngOffsetPerMicrobatch and, after its own M
// advances, skip the other ranks' (dp - 1) M: every microbatch draws what it would at world size 1.
#include "core/error.h"
#include "core/strings.h"
#include "cuda/check.h"
#include "cuda/stream.h"
#include "kernels/fp32_replica.h"
#include "kernels/grad_norm.h"
#include "kernels/weight_fingerprint.h"
#include "model/dropout_sites.h"
#include "model/gradient_readiness.h"
#include "model/train_step.h"

namespace sg::model {

dist::DataParallelLayout TrainStep::data_parallel_layout(const TrainStepOptions& options, int64_t num_params) {
  if (options.reducer != nullptr) return options.reducer->layout();
  // Every rank's shard has the same size: rank 0 stands for each of them.
  return dist::plan_data_parallel(num_params, options.planned_world_size, 0, options.planned_distributed_optimizer);
}

int64_t TrainStep::fp32_replica_count(const dist::DataParallelLayout& dp, const ModelLayout& layout) {
  return dp.sharded ? layout.params.fp32_packed_total() : 0;
}

kernels::Fp32ReplicaParams TrainStep::fp32_replica_params() const {
  return {.replica = fp32_replica_,
          .shard = main_weights_,
          .flat_offsets = fp32_replica_offsets_,
          .n = fp32_replica_count_,
          .owned_begin = dp_.owned.begin,
          .owned_size = dp_.owned.size};
}

void TrainStep::fp32_replica_to_shard(cudaStream_t stream) {
  if (fp32_replica_count_ > 0) kernels::fp32_replica_to_shard(stream, fp32_replica_params());
}

void TrainStep::fp32_replica_from_shard(cudaStream_t stream) {
  if (fp32_replica_count_ > 0) kernels::fp32_replica_from_shard(stream, fp32_replica_params());
}

void TrainStep::bind_reducer() {
  if (reducer_ == nullptr) return;
  const int points = backward_ready_points(static_cast<int64_t>(layers_.size()));
  SG_CHECK(dp_.ready_points == points,
           strprintf("the gradient reducer was planned for %d ready points of the backward; this model's step has %d "
                     "(plan it with model::gradient_readiness of the step's layout)",
                     dp_.ready_points, points));
  dist::ReducerBuffers b;
  b.grads = grads_.data;
  b.grad_type = grads_.is_bf16() ? dist::ElementType::bf16 : dist::ElementType::f32;
  b.params = params_;
  b.losses = &scalars_->aux_loss;  // aux_loss, z_loss, loss: one run of StepScalars (train_step_run.cpp)
  b.losses_count = 3;
  b.step_counts = step_counts_;
  b.step_counts_count = step_counts_count_;
  b.eval_loss_sums = scalars_->eval_loss_sums;
  b.norm_partials = grad_norm_partials_;
  b.norm_partials_count = kernels::kGradNormPartials;
  b.fp32_replica = fp32_replica_;
  b.fp32_replica_count = fp32_replica_count_;
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

void TrainStep::enqueue_weight_fingerprints(cudaStream_t stream, uint64_t* host) const {
  SG_CHECK(fingerprints_.count() > 0,
           "TrainStep::enqueue_weight_fingerprints: TrainStepOptions::weight_fingerprints "
           "was not set, so no buffer was planned");
  kernels::weight_fingerprints(stream, {.data = params_,
                                        .element_bytes = static_cast<int>(sizeof(bf16)),
                                        .count = fingerprints_.bf16_elements,
                                        .chunk_elements = fingerprints_.chunk_elements,
                                        .fingerprints = fingerprint_values_});
  if (fingerprints_.fp32_elements > 0) {
    kernels::weight_fingerprints(stream, {.data = fingerprints_.fp32_replica ? fp32_replica_ : main_weights_,
                                          .element_bytes = static_cast<int>(sizeof(float)),
                                          .count = fingerprints_.fp32_elements,
                                          .chunk_elements = fingerprints_.chunk_elements,
                                          .fingerprints = fingerprint_values_ + fingerprints_.bf16_chunks()});
  }
  SG_CUDA_CHECK(cudaMemcpyAsync(host, fingerprint_values_,
                                static_cast<size_t>(fingerprints_.count()) * sizeof(uint64_t), cudaMemcpyDeviceToHost,
                                stream));
}

uint64_t TrainStep::rank_rng_offset() const {
  return static_cast<uint64_t>(dp_.rank) * static_cast<uint64_t>(batch_.num_microbatches) * kRngOffsetPerMicrobatch;
}

uint64_t TrainStep::other_ranks_rng_offset() const {
  return static_cast<uint64_t>(dp_.world_size - 1) * static_cast<uint64_t>(batch_.num_microbatches) *
         kRngOffsetPerMicrobatch;
}

std::vector<float> TrainStep::download_moment(cudaStream_t stream, const kernels::FloatBuffer& moment) const {
  check_setup_allowed("TrainStep::download_moment");
  if (!dp_.sharded) return download_widened(stream, moment);
  std::vector<float> out;
  gather_state(stream, moment, &out);
  return out;
}

void TrainStep::join_state_gather(cudaStream_t stream) const {
  check_setup_allowed("TrainStep::join_state_gather");
  if (!dp_.sharded) return;
  gather_state(stream, kernels::FloatBuffer(main_weights_), nullptr);
  gather_state(stream, exp_avg_, nullptr);
  gather_state(stream, exp_avg_sq_, nullptr);
}

void TrainStep::gather_state(cudaStream_t stream, const kernels::FloatBuffer& moment, std::vector<float>* out) const {
  // Every rank's shard into the gradient buffer (free between steps; the next step zeroes or overwrites all of it),
  // in place.
  if (moment.is_bf16()) {
    // It holds padded_params bf16 values whatever its own dtype: gathered, then widened.
    reducer_->gather_optimizer_slices(moment.data, grads_.data, dist::ElementType::bf16, stream);
    if (out != nullptr) *out = download_widened(stream, kernels::FloatBuffer(static_cast<bf16*>(grads_.data)));
  } else if (!grads_.is_bf16()) {
    reducer_->gather_optimizer_slices(static_cast<const float*>(moment.data), grads_.data, dist::ElementType::f32,
                                      stream);
    if (out != nullptr) download_floats(stream, static_cast<const float*>(grads_.data), *out);
  } else {
    // A bf16 gradient buffer holds half of every shard's fp32 values: gathered in two halves, each moved as
    // bf16-sized elements (a shard is a multiple of dist::kShardAlignment elements, so it halves evenly).
    const auto* slice = static_cast<const float*>(moment.data);
    const int64_t shard = dp_.owned.size, half = shard / 2, total = layout_.total();
    std::vector<float> staged(out != nullptr ? static_cast<size_t>(dp_.world_size * half) : 0);
    if (out != nullptr) out->resize(static_cast<size_t>(total));
    for (int64_t h = 0; h < 2; ++h) {
      reducer_->gather_optimizer_slices(slice + h * half, grads_.data, dist::ElementType::bf16, stream);
      if (out == nullptr) continue;
      SG_CUDA_CHECK(cudaMemcpyAsync(staged.data(), grads_.data, staged.size() * sizeof(float), cudaMemcpyDeviceToHost,
                                    stream));
      SG_CUDA_CHECK(cudaStreamSynchronize(stream));
      for (int64_t r = 0; r < dp_.world_size; ++r) {
        for (int64_t j = 0; j < half; ++j) {
          const int64_t at = r * shard + h * half + j;
          if (at < total) (*out)[static_cast<size_t>(at)] = staged[static_cast<size_t>(r * half + j)];
        }
      }
    }
  }
  SG_CUDA_CHECK(cudaMemsetAsync(grads_.data, 0, static_cast<size_t>(dp_.padded_params) * grads_.element_bytes(), stream));
  SG_CUDA_CHECK(cudaStreamSynchronize(stream));
}

}  // namespace sg::model
