// TrainStep::enqueue_step: the microbatch loop around the layers' regions, and the step's side of each
// layer boundary (see train_step.h for the boundaries).
// Everything here only enqueues launches on the given stream with arena pointers and plan-time
// constants: no allocation, no host synchronisation, nothing read from the device.
#include <cstddef>

#include "core/strings.h"
#include "cuda/check.h"
#include "cuda/nvtx.h"
#include "kernels/adamw.h"
#include "kernels/dropout.h"
#include "kernels/embedding.h"
#include "kernels/grad_norm.h"
#include "kernels/lr_schedule.h"
#include "kernels/optimizer_step_scalars.h"
#include "kernels/partial_sums.h"
#include "kernels/rmsnorm.h"
#include "kernels/weight_decay_schedule.h"
#include "model/attention_dropout_seeds.h"
#include "model/dropout_sites.h"
#include "model/gradient_readiness.h"
#include "model/lr_schedule.h"
#include "model/train_step.h"
#include "model/weight_decay_schedule.h"

namespace sg::model {

namespace {

// The auxiliary losses, loss and the two NaN flags are one run of StepScalars, so one memset clears
// them at the step's start.
static_assert(offsetof(StepScalars, z_loss) == offsetof(StepScalars, aux_loss) + sizeof(float));
static_assert(offsetof(StepScalars, loss) == offsetof(StepScalars, z_loss) + sizeof(float));
static_assert(offsetof(StepScalars, loss_nonfinite) == offsetof(StepScalars, loss) + sizeof(float));
static_assert(offsetof(StepScalars, grad_nonfinite) == offsetof(StepScalars, loss_nonfinite) + sizeof(int32_t));
constexpr size_t kPerStepScalarBytes =
    offsetof(StepScalars, grad_nonfinite) + sizeof(int32_t) - offsetof(StepScalars, aux_loss);

}  // namespace

void TrainStep::enqueue_step(cudaStream_t stream, graph::RegionRunner& regions) {
  const dist::FlatRange own = dp_.owned;  // what this rank's optimizer updates (everything without DP)
  // Only what no first writer overwrites in microbatch 0 (model/gradient_zeroing.h).
  for (const dist::FlatRange& r : grad_zero_ranges_) {
    SG_CUDA_CHECK(cudaMemsetAsync(grads_.at(r.begin).data, 0, static_cast<size_t>(r.size) * grads_.element_bytes(),
                                  stream));
  }
  SG_CUDA_CHECK(cudaMemsetAsync(&scalars_->aux_loss, 0, kPerStepScalarBytes, stream));
  for (auto& layer : layers_) layer->step_begin(stream);

  for (int64_t mb = 0; mb < batch_.num_microbatches; ++mb) {
    microbatch(stream, regions, mb);
    // The last microbatch's advance happens in optimizer_step_scalars below (one launch fewer).
    if (mb + 1 < batch_.num_microbatches) rng_.launch_advance(stream, kRngOffsetPerMicrobatch);
  }
  uint64_t rng_advance = kRngOffsetPerMicrobatch;
  if (reducer_) {
    reducer_->reduce_gradients(stream);  // gradients and loss summed over the data-parallel ranks
    rng_advance += other_ranks_rng_offset();
  }

  kernels::grad_norm_partials(stream, {.grads = grads_.at(own.begin), .n = own.size, .partials = grad_norm_partials_});
  if (reducer_) reducer_->reduce_norm_partials(stream);  // the shards' sums of squares, over ranks
  const kernels::AdamWHyperparams adam_hyper{.beta1 = static_cast<float>(optimizer_.adam_beta1),
                                             .beta2 = static_cast<float>(optimizer_.adam_beta2),
                                             .eps = static_cast<float>(optimizer_.adam_eps)};
  // Norm, clip coefficient, both NaN flags, lr, weight decay, AdamW's constants, steps done + 1, the RNG advance:
  // one launch.
  const auto weight_decay = weight_decay_schedule<kernels::WeightDecayScheduleConfig>(optimizer_, batch_);
  kernels::optimizer_step_scalars(stream, {.norm_partials = grad_norm_partials_,
                                           .max_norm = static_cast<float>(optimizer_.clip_grad),
                                           .grad_norm = &scalars_->grad_norm,
                                           .clip_coefficient = &scalars_->clip_coef,
                                           .grad_nonfinite = &scalars_->grad_nonfinite,
                                           .loss = &scalars_->loss,
                                           .loss_nonfinite = &scalars_->loss_nonfinite,
                                           .schedule = lr_schedule<kernels::LrScheduleConfig>(optimizer_, batch_),
                                           .weight_decay = weight_decay,
                                           .adamw = adam_hyper,
                                           .step_counter = &scalars_->steps_done,
                                           .lr = &scalars_->lr,
                                           .adamw_constants = &scalars_->adamw_constants,
                                           .rng_states = rng_.device_states(),
                                           .rng_count = static_cast<int64_t>(rng_.size()),
                                           .rng_advance_by = rng_advance});
  // The layers' own updates first (the MoE expert bias, as Megatron's finalize_model_grads before
  // optimizer.step()): AdamW leaves that weight as it is, and then writes its bf16 copy from it.
  for (auto& layer : layers_) layer->step_end(stream);
  fp32_replica_to_shard(stream);  // sharded: what step_end updated in the replica, into the master shard
  kernels::adamw_step(stream, {.master_weights = main_weights_,
                               .compute_weights = params_ + own.begin,
                               .grads = grads_.at(own.begin),
                               .exp_avg = exp_avg_,
                               .exp_avg_sq = exp_avg_sq_,
                               .n = own.size,
                               .n_decay = dist::decayed_elements_in(own, layout_.num_decay()),
                               .step_constants = &scalars_->adamw_constants,
                               .grad_scale = &scalars_->clip_coef,
                               .hyper = adam_hyper});
  fp32_replica_from_shard(stream);                 // sharded: the owned part of the replica, zeros elsewhere
  if (reducer_) reducer_->gather_weights(stream);  // every shard's new bf16 weights (and the replica) on every rank
}

void TrainStep::enqueue_eval(cudaStream_t stream, graph::RegionRunner& regions) {
  SG_CUDA_CHECK(cudaMemsetAsync(scalars_->eval_loss_sums, 0, sizeof(scalars_->eval_loss_sums), stream));
  for (int64_t mb = 0; mb < batch_.num_microbatches; ++mb) {
    const cuda::NvtxRange range(strprintf("eval microbatch %lld", static_cast<long long>(mb)));
    forward(stream, regions, mb, /*train=*/false);
    // The loss only: its token sum and token count, added over the microbatches.
    lm_head_->execute_loss(stream, {.hidden = norm_[layers_.size()],
                                    .weight = params_ + layout_.offset(layout_.lm_head),
                                    .targets = targets_ + mb * T_,
                                    .loss_mask = loss_mask_ + mb * T_,
                                    .loss_sums = scalars_->eval_loss_sums,
                                    .workspace = lm_head_workspace_});
  }
  if (reducer_) reducer_->reduce_eval_loss(stream);  // every rank's rows of the batch: the global sums
}

void TrainStep::forward(cudaStream_t stream, graph::RegionRunner& regions, int64_t mb, bool train) {
  const ModelSpec& m = layout_.spec;
  const int64_t T = T_, H = m.hidden_size;
  const size_t N = layers_.size();
  const int32_t* tokens = tokens_ + mb * T;

  if (train && !attention_dropout_sites_.empty()) {
    write_attention_dropout_seeds(stream, {.state = attention_rng_,
                                           .sites = dropout_sites_,
                                           .seeds = dropout_seeds_,
                                           .offsets = dropout_offsets_,
                                           .count = static_cast<int>(attention_dropout_sites_.size())});
  }

  kernels::embedding_forward(stream, {.out = resid_[0],
                                      .tokens = tokens,
                                      .table = params_ + layout_.offset(layout_.embedding),
                                      .T = T,
                                      .H = H,
                                      .vocab_size = m.vocab_size});
  kernels::rmsnorm_forward(stream, {.out = norm_[0],
                                    .rstd = rstd_[0],
                                    .in = resid_[0],
                                    .weight = params_ + layout_.offset(layout_.norm_before(0)),
                                    .T = T,
                                    .H = H,
                                    .eps = static_cast<float>(m.layernorm_epsilon)});

  for (size_t i = 0; i < N; ++i) {
    Layer& layer = *layers_[i];
    const std::vector<graph::Module>& modules = layer.modules();
    const cuda::NvtxRange layer_range(strprintf("layer %d forward", layer.index()));  // around its regions
    const LayerIO& io = train ? io_[i] : eval_io_[i];
    for (size_t k = 0; k < modules.size(); ++k) {
      const bool last = k + 1 == modules.size();
      regions.run({layer.index(), modules[k], graph::Phase::forward}, stream,
                  [this, &layer, &io, i, module = modules[k], last, train](cudaStream_t s) {
                    layer.forward(module, s, io);
                    if (last) layer_output_forward(s, i, train);
                  });
    }
  }
}

void TrainStep::microbatch(cudaStream_t stream, graph::RegionRunner& regions, int64_t mb) {
  const cuda::NvtxRange range(strprintf("microbatch %lld", static_cast<long long>(mb)));
  const ModelSpec& m = layout_.spec;
  const int64_t T = T_, H = m.hidden_size;
  const size_t N = layers_.size();
  const int64_t row0 = mb * T;
  const int32_t* tokens = tokens_ + row0;

  forward(stream, regions, mb, /*train=*/true);
  // The first microbatch's first writers overwrite their gradients; its backward regions are their own.
  const bool first = first_writers_overwrite_ && mb == 0;
  // The last microbatch's backward tells the reducer when gradients are final (model/gradient_readiness.h),
  // between regions: with overlap it reduces them on its own stream while the backward continues.
  const bool last_microbatch = mb + 1 == batch_.num_microbatches;
  const auto gradients_ready = [&](int point) {
    if (reducer_ != nullptr && last_microbatch) reducer_->gradients_ready(point, stream);
  };

  // LM head + cross-entropy: d_norm_ = d loss / d n_N; adds loss / M into scalars_->loss.
  lm_head_->execute(stream, {.hidden = norm_[N],
                             .weight = params_ + layout_.offset(layout_.lm_head),
                             .targets = targets_ + row0,
                             .loss_mask = loss_mask_ + row0,
                             .dhidden = d_norm_,
                             .dweight = grads_.at(layout_.offset(layout_.lm_head)),
                             .overwrite_dweight = first,
                             .loss_accumulator = &scalars_->loss,
                             .workspace = lm_head_workspace_});
  gradients_ready(0);

  for (size_t i = N; i-- > 0;) {
    Layer& layer = *layers_[i];
    const std::vector<graph::Module>& modules = layer.modules();
    const cuda::NvtxRange layer_range(strprintf("layer %d backward", layer.index()));
    for (size_t k = modules.size(); k-- > 0;) {
      const bool last = k + 1 == modules.size();
      regions.run({layer.index(), modules[k], graph::Phase::backward, first}, stream,
                  [this, &layer, i, module = modules[k], last, first](cudaStream_t s) {
                    if (last) {
                      layer_output_backward(s, i);
                      const RecomputeGroup* group = recompute_->group_ending_at(static_cast<int>(i));
                      if (group != nullptr) recompute_group(s, *group);
                    }
                    LayerIO io = io_[i];
                    io.first_microbatch = first;
                    layer.backward(module, s, io);
                  });
    }
    gradients_ready(layer_ready_point(static_cast<int64_t>(N), static_cast<int64_t>(i)));
  }

  // Layer 0's pre-norm: d x_0 = norm_0'(d n_0) + d x_1.
  norm_backward(stream, d_resid_[0], 0, resid_[0], rstd_[0], N > 0 ? d_resid_[1] : nullptr);
  // Every norm's weight gradient in one launch (their backwards left their partial rows in the scratch).
  kernels::add_partial_column_sums_batched(stream, rmsnorm_scratch_, kernels::rmsnorm_backward_num_partials(T), H,
                                           static_cast<int64_t>(N) + 1, grads_, norm_grad_offsets_);

  kernels::embedding_backward(stream, {.dtable = grads_.at(layout_.offset(layout_.embedding)),
                                       .dout = d_resid_[0],
                                       .tokens = tokens,
                                       .scratch = embedding_scratch_,
                                       .scratch_bytes = embedding_scratch_bytes_,
                                       .T = T,
                                       .H = H,
                                       .vocab_size = m.vocab_size});
  gradients_ready(backward_ready_points(static_cast<int64_t>(N)) - 1);
}

// ---- the step's side of each layer boundary: static buffers of boundary i+1 and the shared scratch ----

void TrainStep::layer_output_forward(cudaStream_t stream, size_t i, bool train) {
  const ModelSpec& m = layout_.spec;
  if (train && m.hidden_dropout > 0.0f) {
    kernels::dropout_forward(stream, {.out = delta_,
                                      .in = delta_,
                                      .state = hidden_rng_,
                                      .n = T_ * m.hidden_size,
                                      .p = m.hidden_dropout,
                                      .site = layout_.output_sites[i]});
  }
  // x_{i+1} = x_i + drop(delta_i), n_{i+1} = norm_{i+1}(x_{i+1})
  kernels::residual_rmsnorm_forward(
      stream, {.residual_out = resid_[i + 1],
               .norm_out = norm_[i + 1],
               .rstd = rstd_[i + 1],
               .residual_in = resid_[i],
               .delta = delta_,
               .weight = params_ + layout_.offset(layout_.norm_before(static_cast<int64_t>(i + 1))),
               .T = T_,
               .H = m.hidden_size,
               .eps = static_cast<float>(m.layernorm_epsilon)});
}

void TrainStep::layer_output_backward(cudaStream_t stream, size_t i) {
  const ModelSpec& m = layout_.spec;
  const bool last = i + 1 == layers_.size();
  bf16* d_out = d_resid_[(i + 1) % 2];
  // d x_{i+1} = norm_{i+1}'(d n_{i+1}) + d x_{i+2} (the last layer's output only feeds the final norm).
  norm_backward(stream, d_out, static_cast<int64_t>(i + 1), resid_[i + 1],
                rstd_[i + 1], last ? nullptr : d_resid_[i % 2]);
  if (m.hidden_dropout > 0.0f) {
    kernels::dropout_backward(stream, {.din = d_delta_,
                                       .dout = d_out,
                                       .state = hidden_rng_,
                                       .n = T_ * m.hidden_size,
                                       .p = m.hidden_dropout,
                                       .site = layout_.output_sites[i]});
  }
}

void TrainStep::recompute_group(cudaStream_t stream, const RecomputeGroup& group) {
  const ModelSpec& m = layout_.spec;
  for (int i = group.begin; i < group.end; ++i) {
    const size_t at = static_cast<size_t>(i);
    if (recompute_->recomputes_norm(i)) {
      // Bitwise what the fused add & norm wrote: it normalises the rounded residual it stored.
      kernels::rmsnorm_forward(stream, {.out = norm_[at],
                                        .rstd = rstd_[at],
                                        .in = resid_[at],
                                        .weight = params_ + layout_.offset(layout_.norm_before(i)),
                                        .T = T_,
                                        .H = m.hidden_size,
                                        .eps = static_cast<float>(m.layernorm_epsilon)});
    }
    Layer& layer = *layers_[at];
    for (const graph::Module module : layer.modules()) {
      if (group.full || recompute_->reruns(i, module)) layer.recompute(module, stream, io_[at]);
    }
    if (group.full && i + 1 < group.end) layer_output_forward(stream, at, /*train=*/true);
  }
}

// norm_before(norm_index)'s backward; its weight gradient stays in its partial rows until the microbatch's
// one column-sum launch (TrainStep::microbatch).
void TrainStep::norm_backward(cudaStream_t stream, bf16* din, int64_t norm_index, const bf16* in, const float* rstd,
                              const bf16* dresidual) {
  const int64_t norm_offset = layout_.offset(layout_.norm_before(norm_index));
  kernels::rmsnorm_backward(
      stream, {.din = din,
               .dweight = nullptr,
               .scratch = rmsnorm_scratch_ + static_cast<size_t>(norm_index) * (rmsnorm_scratch_bytes_ / sizeof(float)),
               .scratch_bytes = rmsnorm_scratch_bytes_,
               .dout = d_norm_,
               .in = in,
               .weight = params_ + norm_offset,
               .rstd = rstd,
               .dresidual = dresidual,
               .T = T_,
               .H = layout_.spec.hidden_size});
}

}  // namespace sg::model
