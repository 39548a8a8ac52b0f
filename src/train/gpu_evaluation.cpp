#include "train/gpu_evaluation.h"

#include <cstring>

#include "core/error.h"
#include "core/strings.h"
#include "cuda/arena.h"
#include "cuda/check.h"

namespace sg::train {

GpuEvaluation::GpuEvaluation(model::TrainStep& step, bool graphs, int64_t max_batches)
    : step_(step), tokens_(static_cast<size_t>(step.tokens_per_step())), max_batches_(max_batches),
      runner_(registry_, /*warmup_steps=*/1, /*enabled=*/graphs, "evaluation") {
  SG_CHECK(max_batches > 0, "GpuEvaluation: validation.eval_iters must be positive");
  for (Slot& slot : slots_) {
    slot.tokens = static_cast<int32_t*>(cuda::pinned_host_allocate(tokens_ * 4, "eval tokens (pinned)"));
    slot.targets = static_cast<int32_t*>(cuda::pinned_host_allocate(tokens_ * 4, "eval targets (pinned)"));
    slot.loss_mask = static_cast<float*>(cuda::pinned_host_allocate(tokens_ * 4, "eval loss mask (pinned)"));
  }
  losses_ = static_cast<float*>(
      cuda::pinned_host_allocate(static_cast<size_t>(max_batches) * sizeof(float), "eval losses (pinned)"));
}

GpuEvaluation::~GpuEvaluation() {
  registry_.destroy_all();
  for (Slot& slot : slots_) {
    cuda::pinned_host_free_noexcept(slot.tokens, "eval tokens (pinned)");
    cuda::pinned_host_free_noexcept(slot.targets, "eval targets (pinned)");
    cuda::pinned_host_free_noexcept(slot.loss_mask, "eval loss mask (pinned)");
  }
  cuda::pinned_host_free_noexcept(losses_, "eval losses (pinned)");
}

void GpuEvaluation::submit(cudaStream_t stream, const model::HostBatch& batch) {
  SG_CHECK(batch.tokens.size() == tokens_ && batch.targets.size() == tokens_ && batch.loss_mask.size() == tokens_,
           strprintf("evaluation batch of %zu tokens for a step of %zu", batch.tokens.size(), tokens_));
  SG_CHECK(submitted_ < max_batches_,
           strprintf("GpuEvaluation: more than validation.eval_iters = %lld batches before collect()",
                     static_cast<long long>(max_batches_)));
  if (submitted_ == 0) start_ = std::chrono::steady_clock::now();
  Slot& slot = slots_[slot_uses_++ % 2];
  if (slot.used) slot.copied.synchronize();  // its previous copy is finished before we overwrite it
  std::memcpy(slot.tokens, batch.tokens.data(), tokens_ * 4);
  std::memcpy(slot.targets, batch.targets.data(), tokens_ * 4);
  std::memcpy(slot.loss_mask, batch.loss_mask.data(), tokens_ * 4);
  SG_CUDA_CHECK(cudaMemcpyAsync(step_.tokens(), slot.tokens, tokens_ * 4, cudaMemcpyHostToDevice, stream));
  SG_CUDA_CHECK(cudaMemcpyAsync(step_.targets(), slot.targets, tokens_ * 4, cudaMemcpyHostToDevice, stream));
  SG_CUDA_CHECK(cudaMemcpyAsync(step_.loss_mask(), slot.loss_mask, tokens_ * 4, cudaMemcpyHostToDevice, stream));
  slot.copied.record(stream);
  slot.used = true;

  const graph::StepMode mode =
      runner_.run_step(stream, [this](cudaStream_t s) { step_.enqueue_eval(s, eager_); });
  captured_ = captured_ || mode == graph::StepMode::capture;
  graphed_ = graphed_ || mode != graph::StepMode::eager;
  SG_CUDA_CHECK(cudaMemcpyAsync(losses_ + submitted_, step_.eval_loss(), sizeof(float), cudaMemcpyDeviceToHost,
                                stream));
  ++submitted_;
}

EvalResult GpuEvaluation::collect(cudaStream_t stream) {
  SG_CUDA_CHECK(cudaStreamSynchronize(stream));
  EvalResult r;
  r.batches = submitted_;
  double sum = 0.0;  // fixed order
  for (int64_t i = 0; i < submitted_; ++i) sum += static_cast<double>(losses_[i]);
  r.loss = submitted_ > 0 ? sum / static_cast<double>(submitted_) : 0.0;
  r.ms = submitted_ > 0
             ? std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start_).count()
             : 0.0;
  r.captured = captured_;
  r.graphed = graphed_;
  submitted_ = 0;
  captured_ = graphed_ = false;
  return r;
}

}  // namespace sg::train
