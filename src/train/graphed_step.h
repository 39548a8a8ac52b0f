#pragma once
// One CUDA-graph mode applied to the model's step — the piece `train` and `bench` share:
//   none                 every step eager (still under the step guard and NVTX ranges)
//   local                FullIterationRunner: warmup eager steps, the whole step captured, then replayed
//   transformer_engine   ScopedGraphRunner: the regions of cuda_graph_scope captured and replayed,
//                        everything else eager between them
#include <cuda_runtime.h>

#include <memory>
#include <string>
#include <vector>

#include "graph/full_iteration_runner.h"
#include "graph/registry.h"
#include "graph/scope_plan.h"
#include "graph/scoped_runner.h"
#include "model/train_step.h"

namespace sg::train {

class GraphedStep {
 public:
  // `impl` and `scope` as in model.cuda_graph_impl / model.cuda_graph_scope (validated config).
  GraphedStep(model::TrainStep& step, const std::string& impl, const std::vector<std::string>& scope,
              int warmup_steps);
  // One training step on `stream`; the batch must already be in the step's input buffers. Returns
  // what it did (eager, capture, replay). A capture step synchronises `stream` once, to time itself.
  graph::StepMode run(cudaStream_t stream);
  // Whether the next run() captures (so callers can measure the memory the graphs take).
  bool next_step_captures() const;

  const graph::ScopePlan& plan() const { return plan_; }
  graph::GraphStats stats() const { return registry_.stats(); }
  // Checks each captured graph before its first launch (graph/registry.h).
  void set_capture_check(graph::GraphRegistry::CaptureCheck check) { registry_.set_capture_check(std::move(check)); }
  // "local (full_iteration): 1 graph of the whole step; 4 graphable layers of 4; 3 warmup steps"
  std::string describe() const;

 private:
  model::TrainStep& step_;
  int warmup_steps_;
  graph::GraphRegistry registry_;
  graph::ScopePlan plan_;
  graph::EagerRegionRunner eager_;
  std::unique_ptr<graph::FullIterationRunner> full_;    // none (disabled) and local
  std::unique_ptr<graph::ScopedGraphRunner> scoped_;    // transformer_engine
  int64_t steps_run_ = 0;
};

}  // namespace sg::train
