#pragma once
// A TrainStep's steps in each graph mode, for the GPU tests: eager; the whole step captured once (after
// one eager step) and replayed, as cuda_graph_impl local does; or the regions of some scopes graphed by
// a ScopedGraphRunner after one warmup step, as transformer_engine does.
#include <cuda_runtime.h>

#include <memory>
#include <optional>
#include <vector>

#include "cuda/check.h"
#include "graph/region.h"
#include "graph/registry.h"
#include "graph/scope_plan.h"
#include "graph/scoped_runner.h"
#include "model/train_step.h"

namespace sg::test {

enum class StepMode { eager, whole_step_graph, region_graphs };

class StepModeDriver {
 public:
  // `scopes`: the regions graphed in StepMode::region_graphs.
  StepModeDriver(model::TrainStep& step, StepMode mode, const std::vector<graph::GraphScope>& scopes = {})
      : step_(step), mode_(mode) {
    if (mode == StepMode::region_graphs) {
      scoped_.emplace(graph::plan_graph_scopes(graph::GraphImpl::transformer_engine, scopes, step.layer_regions(),
                                               step.batch_spec().num_microbatches),
                      registry_, /*warmup_steps=*/1);
    }
  }

  // Enqueues one step on `stream` (the batch already uploaded).
  void run(cudaStream_t stream) {
    const bool first = steps_++ == 0;
    if (mode_ == StepMode::eager || (mode_ == StepMode::whole_step_graph && first)) {
      step_.enqueue_step(stream, eager_);
    } else if (mode_ == StepMode::whole_step_graph) {
      if (!whole_) {
        cudaGraph_t graph = nullptr;
        SG_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
        step_.enqueue_step(stream, eager_);
        SG_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
        cudaGraphExec_t exec = nullptr;
        SG_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
        SG_CUDA_CHECK(cudaGraphDestroy(graph));
        whole_.reset(exec);
      }
      SG_CUDA_CHECK(cudaGraphLaunch(whole_.get(), stream));
    } else {
      scoped_->begin_step();
      step_.enqueue_step(stream, *scoped_);
      scoped_->end_step(stream);
    }
  }

  const graph::GraphRegistry& registry() const { return registry_; }
  // The region graphs' plan (StepMode::region_graphs only).
  const graph::ScopePlan& scope_plan() const { return scoped_->plan(); }

 private:
  struct GraphExecDeleter {
    void operator()(CUgraphExec_st* exec) const { SG_CUDA_CHECK_NOEXCEPT(cudaGraphExecDestroy(exec)); }
  };
  model::TrainStep& step_;
  StepMode mode_;
  int steps_ = 0;
  graph::EagerRegionRunner eager_;
  graph::GraphRegistry registry_;
  std::optional<graph::ScopedGraphRunner> scoped_;
  std::unique_ptr<CUgraphExec_st, GraphExecDeleter> whole_;
};

}  // namespace sg::test
