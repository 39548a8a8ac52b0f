#pragma once
// FullIterationRunner (cuda_graph_impl local, scope full_iteration): the whole step — every
// microbatch's forward and backward, gradient clipping, optimizer, schedule, RNG advance — is one
// callable on one stream. It runs eagerly for the warmup steps, is captured at the next step (then
// launched, so the capture step computes too) and replayed from then on. Inside the step, regions
// use the EagerRegionRunner: the enclosing capture records their launches.
//
// With enabled = false every step is eager, so the trainer has one code path for impl none too.
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "graph/region.h"
#include "graph/registry.h"

namespace sg::graph {

enum class StepMode : uint8_t { eager, capture, replay };
const char* step_mode_name(StepMode mode);  // "eager", "capture", "replay"

class FullIterationRunner {
 public:
  FullIterationRunner(GraphRegistry& registry, int warmup_steps, bool enabled = true,
                      std::string graph_name = "full_iteration");

  // Runs one step and returns what it did. Every mode runs under a cuda::StepGuard ("step N") and an
  // NVTX range. The capture step synchronises `stream` once at its end (outside the guard) to time
  // itself: capture_step_ms(), also in the registry's stats.
  StepMode run_step(cudaStream_t stream, const RegionBody& step);

  StepMode next_mode() const;
  int64_t steps_run() const { return steps_run_; }
  double capture_step_ms() const { return capture_step_ms_; }  // < 0 before the capture step
  // The next step captures again (cudaGraphExecUpdate when the topology is unchanged).
  void recapture() { stale_ = true; }

 private:
  GraphRegistry& registry_;
  int warmup_steps_;
  bool enabled_;
  std::string graph_name_;
  GraphExec* exec_ = nullptr;
  bool stale_ = true;
  int64_t steps_run_ = 0;
  double capture_step_ms_ = -1.0;
};

}  // namespace sg::graph
