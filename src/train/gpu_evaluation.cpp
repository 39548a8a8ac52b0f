#include "train/gpu_evaluation.h"

#include <cstring>

#include "core/error.h"
#include "core/strings.h"
#include "cuda/arena.h"
#include "cuda/check.h"

namespace sg::train {

GpuEvaluation::GpuEvaluation(model::TrainStep& step, bool graphs)
    : step_(step),
      tokens_(static_cast<size_t>(step.tokens_per_step())),
      runner_(registry_, /*warmup_steps=*/1, /*enabled=*/graphs, "evaluation") {
  for (Slot& slot : slots_) {
    slot.tokens = static_cast<int32_t*>(cuda::pinned_host_allocate(tokens_ * 4, "eval tokens (pinned)"));
    slot.targets = static_cast<int32_t*>(cuda::pinned_host_allocate(tokens_ * 4, "eval targets (pinned)"));
    slot.loss_mask = static_cast<float*>(cuda::pinned_host_allocate(tokens_ * 4, "eval loss mask (pinned)"));
    slot.loss_sums = static_cast<double*>(cuda::pinned_host_allocate(2 * sizeof(double), "eval loss sums (pinned)"));
  }
}

GpuEvaluation::~GpuEvaluation() {
  registry_.destroy_all();
  for (Slot& slot : slots_) {
    cuda::pinned_host_free_noexcept(slot.tokens, "eval tokens (pinned)");
    cuda::pinned_host_free_noexcept(slot.targets, "eval targets (pinned)");
    cuda::pinned_host_free_noexcept(slot.loss_mask, "eval loss mask (pinned)");
    cuda::pinned_host_free_noexcept(slot.loss_sums, "eval loss sums (pinned)");
  }
}

void GpuEvaluation::add_sums(Slot& slot) {
  if (!slot.unsummed) return;
  slot.summed.synchronize();
  loss_sum_ += slot.loss_sums[0];
  loss_tokens_ += slot.loss_sums[1];
  slot.unsummed = false;
}

void GpuEvaluation::submit(cudaStream_t stream, const model::HostBatch& batch) {
  SG_CHECK(batch.tokens.size() == tokens_ && batch.targets.size() == tokens_ && batch.loss_mask.size() == tokens_,
           strprintf("evaluation batch of %zu tokens for a step of %zu", batch.tokens.size(), tokens_));
  if (submitted_ == 0) start_ = std::chrono::steady_clock::now();
  Slot& slot = slots_[slot_uses_++ % 2];
  add_sums(slot);                            // the batch before the last one: in submission order
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
  SG_CUDA_CHECK(
      cudaMemcpyAsync(slot.loss_sums, step_.eval_loss_sums(), 2 * sizeof(double), cudaMemcpyDeviceToHost, stream));
  slot.summed.record(stream);
  slot.unsummed = true;
  ++submitted_;
}

EvalResult GpuEvaluation::collect(cudaStream_t stream) {
  SG_CUDA_CHECK(cudaStreamSynchronize(stream));
  // The older of the two outstanding batches first (the slot the next submit would take).
  add_sums(slots_[slot_uses_ % 2]);
  add_sums(slots_[(slot_uses_ + 1) % 2]);
  EvalResult r;
  r.batches = submitted_;
  r.loss = token_mean_loss(loss_sum_, loss_tokens_);
  r.loss_tokens = loss_tokens_;
  r.ms = submitted_ > 0
             ? std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start_).count()
             : 0.0;
  r.captured = captured_;
  r.graphed = graphed_;
  submitted_ = 0;
  loss_sum_ = loss_tokens_ = 0.0;
  captured_ = graphed_ = false;
  return r;
}

}  // namespace sg::train
