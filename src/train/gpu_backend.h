#pragma once
// The GPU backend: the bf16 TrainStep run in the configured CUDA-graph mode, with an input pipeline
// that never stalls the device:
//   submit(batch):  host batch -> pinned slot (double buffered) -> cudaMemcpyAsync into the step's
//                   static input buffers -> the step (eager, capture or replay) -> cudaMemcpyAsync of
//                   the step's device scalars into a pinned ring slot, bracketed by timing events
//   collect(1):     waits only for the steps before the last one, so reading step N-1's loss happens
//                   while step N runs.
#include <deque>
#include <memory>

#include "cuda/stream.h"
#include "model/train_step.h"
#include "train/backend.h"
#include "config/config.h"
#include "train/gpu_evaluation.h"
#include "train/graphed_step.h"

namespace sg::train {

// Whether the GPU backend of `config` builds its whole-evaluation graph: evaluation on (evaluation_enabled)
// and any graph mode but none, whatever the training's scope (train/gpu_evaluation.h).
bool evaluation_graphed(const config::Config& config);
// Whether a CUDA graph of the run holds a collective when the step has a reducer (data parallelism): the
// whole step's graph (impl local) holds the gradient reduction, and the evaluation graph (any impl but
// none, with evaluation on) ends with the evaluation loss's all-reduce (TrainStep::enqueue_eval). With
// transformer_engine and no evaluation the step's collectives run eagerly between region replays. What the
// NCCL_GRAPH_REGISTER rule is applied to (DistributedRun::make_step_reducer).
bool collectives_captured_in_graphs(const config::Config& config);

class GpuBackend final : public TrainingBackend {
 public:
  // `reducer` (data parallelism; must outlive the backend): the step's collectives (model/train_step.h).
  GpuBackend(const config::Config& config, const model::ModelSpec& model, const model::BatchSpec& batch,
             const model::OptimizerSpec& optimizer, rng::RngState rng, dist::GradientReducer* reducer = nullptr);
  ~GpuBackend() override;

  std::string description() const override;
  std::string memory_plan() const override;
  const model::ModelLayout& layout() const override { return step_->layout(); }
  void submit(const model::HostBatch& batch) override;
  std::vector<StepResult> collect(int in_flight) override;
  void eval_submit(const model::HostBatch& batch) override;
  EvalResult eval_collect() override;
  TrainingState state() override;
  void join_state_gather() override;
  void load_state(const TrainingStateView& state) override;
  std::vector<std::string> start_report() const override;
  std::vector<std::string> end_report() const override;
  uint64_t device_memory_used() const override;
  std::string device_name() const override;
  bool on_gpu() const override { return true; }
  std::vector<std::vector<int32_t>> moe_token_counts() override;

  graph::GraphStats graph_stats() const { return graphed_->stats(); }
  // Checks every graph the backend captures (the step's and the evaluation's) before its first launch.
  void set_capture_check(const graph::GraphRegistry::CaptureCheck& check);
  // The evaluation's own graph (train/gpu_evaluation.h); empty stats without evaluation.
  graph::GraphStats eval_graph_stats() const { return eval_ ? eval_->stats() : graph::GraphStats{}; }
  // Device memory the graphs took at capture (cudaMemGetInfo before and after the capture step); -1
  // before the capture.
  int64_t graph_memory_bytes() const { return graph_memory_bytes_; }
  const model::TrainStep& step() const { return *step_; }

 private:
  struct InputSlot {
    int32_t* tokens = nullptr;  // pinned
    int32_t* targets = nullptr;
    float* loss_mask = nullptr;
    cuda::Event copied;  // the H2D copy out of this slot finished
    bool used = false;
  };
  struct InFlight {
    cuda::Event start{true}, end{true}, done;
    model::StepScalars* scalars = nullptr;  // pinned
    uint64_t* fingerprints = nullptr;       // pinned, validation.test_mode with data parallelism
    bool capture = false;
  };
  static constexpr int kRing = 4;

  cuda::Stream stream_;
  std::unique_ptr<model::TrainStep> step_;
  std::unique_ptr<GraphedStep> graphed_;
  std::unique_ptr<GpuEvaluation> eval_;  // when validation.eval_interval is set
  InputSlot inputs_[2];
  InFlight ring_[kRing];
  std::deque<int> pending_;  // ring indices of submitted, not yet collected steps
  int64_t submitted_ = 0;
  int64_t loaded_steps_ = 0;  // steps_done of a loaded state: this run's step numbers continue from it
  size_t tokens_per_step_ = 0;
  int64_t graph_memory_bytes_ = -1;
};

// Factory used by make_backend (train/backend_factory.h).
std::unique_ptr<TrainingBackend> make_gpu_backend(const config::Config& config, const model::ModelSpec& model,
                                                  const model::BatchSpec& batch,
                                                  const model::OptimizerSpec& optimizer, rng::RngState rng);

}  // namespace sg::train
