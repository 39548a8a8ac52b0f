#pragma once
// Where the training step runs. The trainer loop (train/trainer.h) is written once against this
// interface; GpuBackend runs the bf16 step with CUDA graphs, CpuBackend the fp32 reference model.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/philox.h"
#include "model/batch.h"
#include "model/flat_view.h"
#include "model/stack.h"

namespace sg::train {

// What one finished optimizer step reports.
struct StepResult {
  int64_t step = 0;  // 1-based optimizer step
  float loss = 0.0f;
  float grad_norm = 0.0f;
  float lr = 0.0f;
  float aux_loss = 0.0f;  // MoE load-balancing and z-loss (model/train_step.h StepScalars), apart from loss
  float z_loss = 0.0f;
  bool loss_finite = true;
  bool grads_finite = true;
  double step_ms = 0.0;      // device time between the step's start and end events (CPU: wall time)
  bool capture_step = false; // this step captured graphs (its time includes capture; reported apart)
  // validation.test_mode with data parallelism: this rank's weight fingerprints after the step
  // (model/weight_fingerprints.h), which the ranks compare; empty otherwise.
  std::vector<uint64_t> weight_fingerprints;
};

// What one evaluation (validation.eval_interval) measured.
struct EvalResult {
  // The mean loss over the evaluated loss tokens: the batches' summed token losses over their summed token counts
  // (Bridge's evaluate(); max(count, 1) as the training loss), so it does not depend on how rows form batches.
  double loss = 0.0;
  double loss_tokens = 0.0;  // the tokens it counted (loss mask 1), every rank's
  // Batches evaluated: a backend's eval_collect counts the step-shaped batches it ran; Evaluation::run reports the
  // validation batches (of validation.eval_global_batch_size sequences) they held.
  int64_t batches = 0;
  double ms = 0.0;          // wall time of the evaluation, data loading included
  bool captured = false;    // this evaluation captured the evaluation graph
  bool graphed = false;     // the evaluation ran as a CUDA graph (captured or replayed)
};

// EvalResult::loss from the summed token losses and token count.
inline double token_mean_loss(double loss_sum, double tokens) {
  return loss_sum / std::max(tokens, 1.0);
}

// Everything a checkpoint needs to resume bit-exactly, on the host.
struct TrainingState {
  std::vector<float> main_weights;  // fp32, ModelLayout::total() elements
  std::vector<float> exp_avg;       // empty (both moments): zeros, a fresh optimizer (a pretrained start)
  std::vector<float> exp_avg_sq;
  int64_t steps_done = 0;
  rng::RngState rng{};  // the generator state the next step starts from
};

// What a backend loads: the state as views (model/flat_view.h) of host vectors (a TrainingState) or of the mapped
// files of a checkpoint (train/checkpointing.h LoadedCheckpoint), which the backend reads in chunks without a host
// copy. Moments of FlatView::zeros are a fresh optimizer's.
struct TrainingStateView {
  model::FlatView main_weights, exp_avg, exp_avg_sq;
  int64_t steps_done = 0;
  rng::RngState rng{};

  TrainingStateView() = default;
  // Views of `state`'s vectors (it must outlive the view), as string_view of a string.
  TrainingStateView(const TrainingState& state)  // NOLINT: implicit on purpose
      : main_weights(state.main_weights),
        exp_avg(moment(state, state.exp_avg)),
        exp_avg_sq(moment(state, state.exp_avg_sq)),
        steps_done(state.steps_done),
        rng(state.rng) {}

 private:
  static model::FlatView moment(const TrainingState& state, const std::vector<float>& values) {
    const bool fresh = state.exp_avg.empty() && state.exp_avg_sq.empty();
    return fresh ? model::FlatView::zeros(static_cast<int64_t>(state.main_weights.size())) : model::FlatView(values);
  }
};

class TrainingBackend {
 public:
  virtual ~TrainingBackend() = default;
  virtual std::string description() const = 0;  // one line: device, precision, graph mode
  virtual std::string memory_plan() const = 0;   // bytes per category (GPU) or host buffers (CPU)
  virtual const model::ModelLayout& layout() const = 0;

  // Starts the next optimizer step on `batch`. The GPU backend copies the batch asynchronously into
  // its static input buffers and enqueues the step, returning at once.
  virtual void submit(const model::HostBatch& batch) = 0;
  // Results of finished steps, oldest first, leaving at most `in_flight` submitted steps unread:
  // collect(1) right after submit() reads the previous step while the current one runs.
  virtual std::vector<StepResult> collect(int in_flight) = 0;

  // Forward-only evaluation, between steps (call collect(0) first): eval_submit() runs one global
  // batch's forward with dropout off and no backward, optimizer or RNG advance; eval_collect() waits and
  // returns the token mean loss of the batches submitted since the last eval_collect(). Nothing the training
  // reads changes, so a run's training losses are the same bits with and without evaluation.
  virtual void eval_submit(const model::HostBatch& batch) = 0;
  virtual EvalResult eval_collect() = 0;

  virtual TrainingState state() = 0;  // waits for the device; copies the state to the host
  // The collectives of state() without its copy: a data-parallel rank that does not write the checkpoint calls it
  // while the writer calls state() (with the distributed optimizer state() gathers the shards, a collective every rank
  // joins). Nothing to do for a backend without collectives.
  virtual void join_state_gather() {}
  // Reads `state` (its views must stay valid until it returns) into the backend's own buffers.
  virtual void load_state(const TrainingStateView& state) = 0;

  // Lines for the user at start (what will be graphed) and at the end (replays, graph memory).
  virtual std::vector<std::string> start_report() const { return {}; }
  virtual std::vector<std::string> end_report() const { return {}; }
  virtual uint64_t device_memory_used() const { return 0; }
  virtual std::string device_name() const { return "cpu"; }
  virtual bool on_gpu() const { return false; }
  // MoE models: the kept tokens per expert of the last finished step, one row per MoE layer (waits for
  // the device; call between steps, e.g. at the log interval). Empty for dense models.
  virtual std::vector<std::vector<int32_t>> moe_token_counts() { return {}; }

  // Messages the backend emits while running (e.g. "captured 1 graph in 84 ms"); set by the trainer.
  std::function<void(const std::string&)> notify = [](const std::string&) {};
};

}  // namespace sg::train
