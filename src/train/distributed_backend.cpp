#include "train/distributed_backend.h"

#include "core/error.h"
#include "core/strings.h"
#include "model/gradient_readiness.h"
#include "model/layer_registry.h"

namespace sg::train {

DistributedGpuBackend::DistributedGpuBackend(DistributedRun& run, const config::Config& config,
                                             const model::ModelSpec& model, const model::BatchSpec& batch,
                                             const model::OptimizerSpec& optimizer, rng::RngState rng)
    : run_(run) {
  // Collectives are captured in the whole-step graph (impl local) and, with evaluation on, in the evaluation
  // graph of any graph mode (its loss all-reduce); transformer_engine runs the step's collectives eagerly
  // between region replays (collectives_captured_in_graphs).
  const model::ModelLayout layout = model::model_layout(model);
  reducer_ = run_.make_step_reducer(config, layout.total(), model::gradient_readiness(layout),
                                    collectives_captured_in_graphs(config));
  inner_ = std::make_unique<GpuBackend>(config, model, batch, optimizer, rng, reducer_.get());
  inner_->notify = [this](const std::string& text) { notify(text); };
  inner_->set_capture_check(run_.capture_check());  // before any capture: every graph compared across ranks
}

DistributedGpuBackend::~DistributedGpuBackend() = default;

std::string DistributedGpuBackend::description() const {
  return inner_->description() + "; " + reducer_->layout().describe();
}

std::vector<StepResult> DistributedGpuBackend::collect(int in_flight) {
  std::vector<StepResult> results = inner_->collect(in_flight);
  for (const StepResult& r : results) {
    if (r.weight_fingerprints.empty()) continue;
    run_.require_same_weights(r.step, r.weight_fingerprints, [this](int64_t index) {
      return model::describe_weight_fingerprint(inner_->layout(), inner_->step().weight_fingerprints(), index);
    });
  }
  return results;
}

std::vector<std::string> DistributedGpuBackend::start_report() const {
  std::vector<std::string> lines = inner_->start_report();
  lines.push_back(run_.describe());
  return lines;
}

}  // namespace sg::train
