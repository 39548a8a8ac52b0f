#pragma once
// The GPU backend of one data-parallel rank: GpuBackend with a gradient reducer over the run's NCCL
// communicator (train/distributed_run.h), so the step's collectives run inside it — captured with the
// whole step (local full_iteration) or eagerly between region replays (transformer_engine). Each captured
// graph (the step's, the evaluation's) is compared across ranks (name, nodes, kernels) before its first
// launch: a rank that captured a different step would deadlock the collectives at the replay. With
// validation.test_mode the ranks compare their weights after every step.
#include <memory>

#include "config/config.h"
#include "train/backend.h"
#include "train/distributed_run.h"
#include "train/gpu_backend.h"

namespace sg::train {

class DistributedGpuBackend final : public TrainingBackend {
 public:
  // Selects this rank's GPU, applies the NCCL_GRAPH_REGISTER rule (dist/communicator.h), creates the
  // communicator and the reducer, then the step. `run` must outlive the backend.
  DistributedGpuBackend(DistributedRun& run, const config::Config& config, const model::ModelSpec& model,
                        const model::BatchSpec& batch, const model::OptimizerSpec& optimizer, rng::RngState rng);
  ~DistributedGpuBackend() override;

  std::string description() const override;
  std::string memory_plan() const override { return inner_->memory_plan(); }
  const model::ModelLayout& layout() const override { return inner_->layout(); }
  void submit(const model::HostBatch& batch) override { inner_->submit(batch); }
  // With validation.test_mode, each collected step's weight fingerprints are compared with every other rank's
  // (DistributedRun::require_same_weights): ranks holding different weights stop the run naming what differs.
  std::vector<StepResult> collect(int in_flight) override;
  // Each rank evaluates its rows of the batch; the step sums the ranks' losses (TrainStep::enqueue_eval).
  void eval_submit(const model::HostBatch& batch) override { inner_->eval_submit(batch); }
  EvalResult eval_collect() override { return inner_->eval_collect(); }
  TrainingState state() override { return inner_->state(); }  // collective with the distributed optimizer
  void join_state_gather() override { inner_->join_state_gather(); }
  void load_state(const TrainingStateView& state) override { inner_->load_state(state); }
  std::vector<std::string> start_report() const override;
  std::vector<std::string> end_report() const override { return inner_->end_report(); }
  uint64_t device_memory_used() const override { return inner_->device_memory_used(); }
  std::string device_name() const override { return inner_->device_name(); }
  bool on_gpu() const override { return inner_->on_gpu(); }
  std::vector<std::vector<int32_t>> moe_token_counts() override { return inner_->moe_token_counts(); }

 private:
  DistributedRun& run_;
  std::unique_ptr<dist::GradientReducer> reducer_;
  std::unique_ptr<GpuBackend> inner_;  // declared after reducer_: destroyed (graphs, step) before it
};

}  // namespace sg::train
