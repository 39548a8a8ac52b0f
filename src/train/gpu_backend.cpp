#include "train/gpu_backend.h"

#include <cstring>

#include "config/graph_keys.h"
#include "core/log.h"
#include "core/strings.h"
#include "cuda/arena.h"
#include "cuda/check.h"
#include "cuda/device.h"
#include "model/init.h"
#include "model/layer_registry.h"
#include "train/evaluation.h"

namespace sg::train {

bool evaluation_graphed(const config::Config& config) {
  return evaluation_enabled(config) && !config::graph_impl_is(config.model, graph::GraphImpl::none);
}

bool collectives_captured_in_graphs(const config::Config& config) {
  return config::graph_impl_is(config.model, graph::GraphImpl::local) || evaluation_graphed(config);
}

GpuBackend::GpuBackend(const config::Config& config, const model::ModelSpec& model, const model::BatchSpec& batch,
                       const model::OptimizerSpec& optimizer, rng::RngState rng, dist::GradientReducer* reducer) {
  model::TrainStepOptions step_options;
  step_options.reducer = reducer;
  // validation.test_mode: the ranks compare their weights' fingerprints after every step
  // (DistributedGpuBackend::collect); one process has nothing to compare them with.
  step_options.weight_fingerprints =
      config.validation.test_mode && reducer != nullptr && reducer->layout().world_size > 1;
  step_ = std::make_unique<model::TrainStep>(model, batch, optimizer, rng.seed, step_options);
  step_->upload_parameters(stream_, model::initial_parameters(step_->layout(), rng.seed));
  graphed_ = std::make_unique<GraphedStep>(*step_, config.model.cuda_graph_impl, config.model.cuda_graph_scope,
                                           static_cast<int>(config.model.cuda_graph_warmup_steps));
  tokens_per_step_ = static_cast<size_t>(step_->tokens_per_step());
  if (evaluation_enabled(config)) {
    eval_ = std::make_unique<GpuEvaluation>(*step_, evaluation_graphed(config));
  }
  for (auto& slot : inputs_) {
    slot.tokens = static_cast<int32_t*>(cuda::pinned_host_allocate(tokens_per_step_ * 4, "input tokens (pinned)"));
    slot.targets = static_cast<int32_t*>(cuda::pinned_host_allocate(tokens_per_step_ * 4, "input targets (pinned)"));
    slot.loss_mask = static_cast<float*>(cuda::pinned_host_allocate(tokens_per_step_ * 4, "input loss mask (pinned)"));
  }
  const size_t fingerprint_bytes = static_cast<size_t>(step_->weight_fingerprints().count()) * sizeof(uint64_t);
  for (auto& r : ring_) {
    r.scalars = static_cast<model::StepScalars*>(
        cuda::pinned_host_allocate(sizeof(model::StepScalars), "step scalars (pinned)"));
    if (fingerprint_bytes > 0) {
      r.fingerprints =
          static_cast<uint64_t*>(cuda::pinned_host_allocate(fingerprint_bytes, "weight fingerprints (pinned)"));
    }
  }
}

void GpuBackend::set_capture_check(const graph::GraphRegistry::CaptureCheck& check) {
  graphed_->set_capture_check(check);
  if (eval_) eval_->set_capture_check(check);
}

GpuBackend::~GpuBackend() {
  // Never throw from here: the device may be in an error state after a failed step. But say so: a
  // silent release would hide why a run ended.
  if (const cudaError_t err = cudaStreamSynchronize(stream_); err != cudaSuccess) {
    log::warn(strprintf("releasing the GPU: the stream reported %s (%s)", cudaGetErrorName(err),
                        cudaGetErrorString(err)));
  }
  eval_.reset();
  graphed_.reset();
  for (auto& slot : inputs_) {
    cuda::pinned_host_free_noexcept(slot.tokens, "input tokens (pinned)");
    cuda::pinned_host_free_noexcept(slot.targets, "input targets (pinned)");
    cuda::pinned_host_free_noexcept(slot.loss_mask, "input loss mask (pinned)");
  }
  for (auto& r : ring_) {
    cuda::pinned_host_free_noexcept(r.scalars, "step scalars (pinned)");
    if (r.fingerprints != nullptr) cuda::pinned_host_free_noexcept(r.fingerprints, "weight fingerprints (pinned)");
  }
}

std::string GpuBackend::description() const {
  return strprintf("GPU %s: bf16 compute, fp32 main weights and gradients; CUDA graphs: %s",
                   cuda::device_properties().summary().c_str(), graphed_->describe().c_str());
}

std::string GpuBackend::memory_plan() const { return step_->memory_breakdown(); }

std::string GpuBackend::device_name() const { return cuda::device_properties().name; }

uint64_t GpuBackend::device_memory_used() const {
  size_t free_bytes = 0, total_bytes = 0;
  SG_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  return total_bytes - free_bytes;
}

void GpuBackend::submit(const model::HostBatch& batch) {
  SG_CHECK(batch.tokens.size() == tokens_per_step_ && batch.targets.size() == tokens_per_step_ &&
               batch.loss_mask.size() == tokens_per_step_,
           strprintf("batch of %zu tokens for a step of %zu", batch.tokens.size(), tokens_per_step_));
  SG_CHECK(static_cast<int>(pending_.size()) < kRing,
           "GpuBackend::submit: too many steps in flight; call collect() after every submit()");
  InputSlot& slot = inputs_[submitted_ % 2];
  if (slot.used) slot.copied.synchronize();  // its previous copy (two steps ago) is long finished
  std::memcpy(slot.tokens, batch.tokens.data(), tokens_per_step_ * 4);
  std::memcpy(slot.targets, batch.targets.data(), tokens_per_step_ * 4);
  std::memcpy(slot.loss_mask, batch.loss_mask.data(), tokens_per_step_ * 4);
  SG_CUDA_CHECK(cudaMemcpyAsync(step_->tokens(), slot.tokens, tokens_per_step_ * 4, cudaMemcpyHostToDevice, stream_));
  SG_CUDA_CHECK(cudaMemcpyAsync(step_->targets(), slot.targets, tokens_per_step_ * 4, cudaMemcpyHostToDevice, stream_));
  SG_CUDA_CHECK(cudaMemcpyAsync(step_->loss_mask(), slot.loss_mask, tokens_per_step_ * 4, cudaMemcpyHostToDevice,
                                stream_));
  slot.copied.record(stream_);
  slot.used = true;

  const int r = static_cast<int>(submitted_ % kRing);
  InFlight& f = ring_[r];
  const bool captures = graphed_->next_step_captures();
  size_t free_before = 0, total = 0;
  if (captures) SG_CUDA_CHECK(cudaMemGetInfo(&free_before, &total));
  f.start.record(stream_);
  const graph::StepMode mode = graphed_->run(stream_);
  f.end.record(stream_);
  SG_CUDA_CHECK(cudaMemcpyAsync(f.scalars, step_->scalars(), sizeof(model::StepScalars), cudaMemcpyDeviceToHost,
                                stream_));
  if (f.fingerprints != nullptr) step_->enqueue_weight_fingerprints(stream_, f.fingerprints);
  f.done.record(stream_);
  f.capture = mode == graph::StepMode::capture;
  if (f.capture) {
    size_t free_after = 0;
    SG_CUDA_CHECK(cudaMemGetInfo(&free_after, &total));
    const graph::GraphStats s = graphed_->stats();
    const long long delta = static_cast<long long>(free_before) - static_cast<long long>(free_after);
    graph_memory_bytes_ = delta;
    notify(strprintf("captured %d CUDA graph%s at step %lld: capture %.1f ms, instantiate %.1f ms; the graphs took "
                     "%s of device memory (%.3f%% of the planned %s)",
                     s.graphs_live, s.graphs_live == 1 ? "" : "s",
                     static_cast<long long>(loaded_steps_ + submitted_ + 1),
                     s.capture_ms, s.instantiate_ms, delta >= 0 ? human_bytes(static_cast<uint64_t>(delta)).c_str() : "0 B",
                     100.0 * static_cast<double>(std::max<long long>(delta, 0)) /
                         static_cast<double>(step_->arena().total_bytes()),
                     human_bytes(step_->arena().total_bytes()).c_str()));
  }
  pending_.push_back(r);
  ++submitted_;
}

std::vector<StepResult> GpuBackend::collect(int in_flight) {
  std::vector<StepResult> out;
  while (static_cast<int>(pending_.size()) > std::max(in_flight, 0)) {
    InFlight& f = ring_[pending_.front()];
    pending_.pop_front();
    f.done.synchronize();
    const model::StepScalars& s = *f.scalars;
    StepResult r;
    r.step = s.steps_done;
    r.loss = s.loss;
    r.grad_norm = s.grad_norm;
    r.lr = s.lr;
    r.aux_loss = s.aux_loss;
    r.z_loss = s.z_loss;
    r.loss_finite = s.loss_nonfinite == 0;
    r.grads_finite = s.grad_nonfinite == 0;
    r.step_ms = cuda::Event::elapsed_ms(f.start, f.end);
    r.capture_step = f.capture;
    if (f.fingerprints != nullptr) {
      r.weight_fingerprints.assign(f.fingerprints, f.fingerprints + step_->weight_fingerprints().count());
    }
    out.push_back(r);
  }
  return out;
}

std::vector<std::vector<int32_t>> GpuBackend::moe_token_counts() {
  stream_.synchronize();
  return model::moe_step_token_counts(step_->layers(), stream_);
}

void GpuBackend::eval_submit(const model::HostBatch& batch) {
  SG_CHECK(eval_ != nullptr, "GpuBackend: evaluation needs validation.eval_interval (set when the backend was made)");
  SG_CHECK(pending_.empty(), "GpuBackend::eval_submit: collect(0) the training steps first");
  eval_->submit(stream_, batch);
}

EvalResult GpuBackend::eval_collect() {
  SG_CHECK(eval_ != nullptr, "GpuBackend: evaluation needs validation.eval_interval (set when the backend was made)");
  return eval_->collect(stream_);
}

TrainingState GpuBackend::state() {
  stream_.synchronize();
  TrainingState s;
  s.main_weights = step_->download_main_weights(stream_);
  s.exp_avg = step_->download_exp_avg(stream_);
  s.exp_avg_sq = step_->download_exp_avg_sq(stream_);
  s.steps_done = step_->download_scalars(stream_).steps_done;
  s.rng = step_->download_rng_state(stream_);
  return s;
}

void GpuBackend::join_state_gather() {
  stream_.synchronize();
  step_->join_state_gather(stream_);
}

void GpuBackend::load_state(const TrainingStateView& state) {
  step_->load_state(stream_, state.main_weights, state.exp_avg, state.exp_avg_sq, state.steps_done, state.rng);
  loaded_steps_ = state.steps_done;
}

std::vector<std::string> GpuBackend::start_report() const {
  const graph::ScopePlan& plan = graphed_->plan();
  if (plan.impl == graph::GraphImpl::none) return {"CUDA graphs: off (model.cuda_graph_impl = none): every step eager"};
  const int graphs = plan.num_graphs();  // the plan knows the step's microbatches: describe() says the same
  return {strprintf("CUDA graphs: %d graph%s will be captured; %d graphable layers of %d; %s", graphs,
                    graphs == 1 ? "" : "s", plan.graphable_layers, plan.total_layers,
                    graphed_->describe().c_str())};
}

std::vector<std::string> GpuBackend::end_report() const {
  if (graphed_->plan().impl == graph::GraphImpl::none) return {};
  return {"CUDA " + graphed_->stats().summary()};
}

std::unique_ptr<TrainingBackend> make_gpu_backend(const config::Config& config, const model::ModelSpec& model,
                                                  const model::BatchSpec& batch,
                                                  const model::OptimizerSpec& optimizer, rng::RngState rng) {
  return std::make_unique<GpuBackend>(config, model, batch, optimizer, rng);
}

}  // namespace sg::train
