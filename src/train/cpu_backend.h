#pragma once
// The CPU fallback: the fp32 reference model (model/cpu_model.h), graphs off. Slow but complete, so a
// machine without a GPU (CI) trains a tiny model end to end.
#include <deque>

#include "model/cpu_model.h"
#include "model/layer_registry.h"
#include "train/backend.h"

namespace sg::train {

class CpuBackend final : public TrainingBackend {
 public:
  CpuBackend(const model::ModelSpec& model, const model::BatchSpec& batch,
             const model::OptimizerSpec& optimizer, rng::RngState rng);

  std::string description() const override;
  std::string memory_plan() const override;
  const model::ModelLayout& layout() const override { return model_.layout(); }
  void submit(const model::HostBatch& batch) override;
  std::vector<StepResult> collect(int in_flight) override;
  void eval_submit(const model::HostBatch& batch) override;
  EvalResult eval_collect() override;
  TrainingState state() override;
  uint64_t device_memory_used() const override;  // the process's resident memory
  void load_state(const TrainingStateView& state) override;
  std::vector<std::vector<int32_t>> moe_token_counts() override {
    return model::moe_step_token_counts(model_.layers());
  }

 private:
  model::CpuModel model_;
  std::deque<StepResult> done_;
  std::vector<model::TokenLossSums> eval_losses_;  // since the last eval_collect
};

}  // namespace sg::train
