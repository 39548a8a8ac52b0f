#pragma once
// Evaluation on the GPU (validation.eval_interval): TrainStep::enqueue_eval — every microbatch's forward with
// dropout off and the LM head's loss only — on the training stream, between steps. With CUDA graphs on
// (any cuda_graph_impl but none) the evaluation of one batch is its own graph: the first evaluated batch
// runs eagerly (first use of the no-dropout attention plan), the second is captured, every later one
// replays it. It is always a whole-evaluation graph whatever the training's scope: forward-only has no
// host check inside, and the training's region graphs contain dropout.
//
// Per batch: host batch -> pinned slot (two, alternating) -> cudaMemcpyAsync into the step's input
// buffers -> the evaluation -> cudaMemcpyAsync of its token loss sum and token count into the slot. The host adds a
// slot's sums into the totals, in submission order, before it reuses the slot; collect() waits once and adds the
// last ones.
#include <chrono>
#include <memory>
#include <vector>

#include "cuda/stream.h"
#include "graph/full_iteration_runner.h"
#include "graph/registry.h"
#include "model/batch.h"
#include "model/train_step.h"
#include "train/backend.h"

namespace sg::train {

class GpuEvaluation {
 public:
  GpuEvaluation(model::TrainStep& step, bool graphs);
  ~GpuEvaluation();
  GpuEvaluation(const GpuEvaluation&) = delete;
  GpuEvaluation& operator=(const GpuEvaluation&) = delete;

  void submit(cudaStream_t stream, const model::HostBatch& batch);
  EvalResult collect(cudaStream_t stream);
  graph::GraphStats stats() const { return registry_.stats(); }
  // Checks the evaluation graph before its first launch (graph/registry.h).
  void set_capture_check(graph::GraphRegistry::CaptureCheck check) { registry_.set_capture_check(std::move(check)); }

 private:
  struct Slot {
    int32_t* tokens = nullptr;  // pinned
    int32_t* targets = nullptr;
    float* loss_mask = nullptr;
    double* loss_sums = nullptr;  // pinned [2]: its batch's StepScalars::eval_loss_sums
    cuda::Event copied;           // the inputs are on the device
    cuda::Event summed;           // loss_sums holds its batch's sums
    bool used = false;
    bool unsummed = false;  // loss_sums not yet added into the totals
  };
  // Waits for the slot's sums and adds them into the totals.
  void add_sums(Slot& slot);

  model::TrainStep& step_;
  size_t tokens_ = 0;
  graph::GraphRegistry registry_;
  graph::EagerRegionRunner eager_;
  graph::FullIterationRunner runner_;
  Slot slots_[2];
  double loss_sum_ = 0.0, loss_tokens_ = 0.0;  // of the batches summed since the last collect
  int64_t submitted_ = 0;                      // batches since the last collect
  int64_t slot_uses_ = 0;
  bool captured_ = false, graphed_ = false;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace sg::train
