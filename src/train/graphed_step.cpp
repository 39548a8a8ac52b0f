#include "train/graphed_step.h"

#include "core/strings.h"
#include "cuda/arena.h"
#include "cuda/nvtx.h"

namespace sg::train {

GraphedStep::GraphedStep(model::TrainStep& step, const std::string& impl, const std::vector<std::string>& scope,
                         int warmup_steps)
    : step_(step),
      warmup_steps_(warmup_steps),
      plan_(graph::plan_graph_scopes(graph::parse_graph_impl(impl), graph::parse_graph_scopes(scope),
                                     step.layer_regions(), step.batch_spec().num_microbatches)) {
  if (plan_.impl == graph::GraphImpl::transformer_engine) {
    scoped_ = std::make_unique<graph::ScopedGraphRunner>(plan_, registry_, warmup_steps);
  } else {
    full_ = std::make_unique<graph::FullIterationRunner>(registry_, warmup_steps,
                                                         /*enabled=*/plan_.full_iteration);
  }
}

bool GraphedStep::next_step_captures() const {
  if (full_) return full_->next_mode() == graph::StepMode::capture;
  return steps_run_ == warmup_steps_;
}

graph::StepMode GraphedStep::run(cudaStream_t stream) {
  ++steps_run_;
  if (full_) {
    return full_->run_step(stream, [this](cudaStream_t s) { step_.enqueue_step(s, eager_); });
  }
  // The eager skeleton runs under the step guard too: an allocation or host sync anywhere in the
  // step is an error in every mode, not only inside graphed regions.
  const std::string name = strprintf("step %lld", static_cast<long long>(steps_run_));
  cuda::NvtxRange range(name);
  // run_step leaves the runner outside a step when the step throws (a failed region capture), so a
  // caller that catches and steps again sees its own error, not a runner stuck inside a step.
  scoped_->run_step(stream, [this, &name](cudaStream_t s) {
    cuda::StepGuard guard(name);  // ends before end_step's one synchronisation of a capture step
    step_.enqueue_step(s, *scoped_);
  });
  if (scoped_->step_captured()) return graph::StepMode::capture;
  return scoped_->graphs_active() ? graph::StepMode::replay : graph::StepMode::eager;
}

std::string GraphedStep::describe() const {
  std::string text = plan_.describe();
  if (plan_.impl != graph::GraphImpl::none) {
    text += "; " + graph::describe_warmup(warmup_steps_);
  }
  return text;
}

}  // namespace sg::train
