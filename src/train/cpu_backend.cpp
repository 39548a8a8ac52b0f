#include "train/cpu_backend.h"

#include <chrono>

#include "core/strings.h"
#include "train/progress_lines.h"

namespace sg::train {

CpuBackend::CpuBackend(const model::ModelSpec& model, const model::BatchSpec& batch,
                       const model::OptimizerSpec& optimizer, rng::RngState rng)
    : model_(model, batch, optimizer, rng) {}

std::string CpuBackend::description() const {
  return "CPU fp32 reference backend (graphs off)";
}

std::string CpuBackend::memory_plan() const {
  const auto total = static_cast<uint64_t>(model_.layout().total());
  return strprintf("host memory: parameters %s, gradients %s, optimizer state %s (fp32)",
                   human_bytes(total * 4).c_str(), human_bytes(total * 4).c_str(),
                   human_bytes(total * 8).c_str());
}

uint64_t CpuBackend::device_memory_used() const { return process_resident_bytes(); }

void CpuBackend::submit(const model::HostBatch& batch) {
  const auto start = std::chrono::steady_clock::now();
  const model::CpuStepResult r = model_.train_step(batch);
  StepResult out;
  out.step = model_.steps_done();
  out.loss = r.loss;
  out.grad_norm = r.grad_norm;
  out.lr = r.lr;
  out.aux_loss = r.aux_loss;
  out.z_loss = r.z_loss;
  out.loss_finite = r.loss_finite;
  out.grads_finite = r.grads_finite;
  out.step_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  done_.push_back(out);
}

std::vector<StepResult> CpuBackend::collect(int /*in_flight*/) {
  // The CPU step is synchronous: everything submitted is finished.
  std::vector<StepResult> out(done_.begin(), done_.end());
  done_.clear();
  return out;
}

void CpuBackend::eval_submit(const model::HostBatch& batch) { eval_losses_.push_back(model_.evaluate(batch)); }

EvalResult CpuBackend::eval_collect() {
  EvalResult r;
  r.batches = static_cast<int64_t>(eval_losses_.size());
  double loss_sum = 0.0;  // in submission order, as the GPU backend
  for (const model::TokenLossSums& sums : eval_losses_) {
    loss_sum += sums.loss;
    r.loss_tokens += sums.tokens;
  }
  r.loss = token_mean_loss(loss_sum, r.loss_tokens);
  eval_losses_.clear();
  return r;
}

TrainingState CpuBackend::state() {
  TrainingState s;
  s.main_weights = model_.weights();
  s.exp_avg = model_.exp_avg();
  s.exp_avg_sq = model_.exp_avg_sq();
  s.steps_done = model_.steps_done();
  s.rng = model_.rng_state();
  return s;
}

void CpuBackend::load_state(const TrainingStateView& state) {
  model_.load_state(state.main_weights, state.exp_avg, state.exp_avg_sq, state.steps_done, state.rng);
}

}  // namespace sg::train
