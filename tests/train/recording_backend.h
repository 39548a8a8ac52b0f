#pragma once
// A training backend for the evaluation's CPU tests: it records the batches an Evaluation submits and trains
// nothing; eval_collect counts them.
#include <string>
#include <vector>

#include "core/error.h"
#include "model/batch.h"
#include "train/backend.h"

namespace sg::test {

class RecordingBackend final : public train::TrainingBackend {
 public:
  std::string description() const override { return "recording"; }
  std::string memory_plan() const override { return ""; }
  const model::ModelLayout& layout() const override { throw Error("RecordingBackend has no layout"); }
  void submit(const model::HostBatch&) override {}
  std::vector<train::StepResult> collect(int) override { return {}; }
  void eval_submit(const model::HostBatch& batch) override { batches.push_back(batch); }
  train::EvalResult eval_collect() override { return {.batches = static_cast<int64_t>(batches.size())}; }
  train::TrainingState state() override { return {}; }
  void load_state(const train::TrainingStateView&) override {}

  std::vector<model::HostBatch> batches;
};

}  // namespace sg::test
