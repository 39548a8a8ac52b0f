#pragma once
// ScopedGraphRunner (cuda_graph_impl transformer_engine): a RegionRunner that graphs the regions of
// the scope plan and runs everything else eagerly, inside the eager skeleton of the step.
//
//   steps [0, warmup_steps)     every region eager (libraries finish lazy setup, caches warm up)
//   step warmup_steps           a graphed region's first run captures it, instantiates it, then
//                               launches the graph (so the capture step computes too); later runs
//                               in the same step (other microbatches) replay it
//   later steps                 graphed regions replay, for every microbatch
// A region the plan graphs is graphed in both its variants (RegionKey::first_microbatch): two graphs
// for a backward region when the step has more than one microbatch.
//
// Region bodies must follow the contract in graph/region.h (same pointers every call, per-call
// values read from device memory). Every region runs under a cuda::StepGuard and an NVTX range.
#include <chrono>
#include <cstdint>
#include <string>
#include <unordered_map>

#include "graph/region.h"
#include "graph/registry.h"
#include "graph/scope_plan.h"

namespace sg::graph {

struct RegionKeyHash {
  size_t operator()(const RegionKey& k) const {
    return (static_cast<size_t>(static_cast<uint32_t>(k.layer)) << 16) ^ (static_cast<size_t>(k.module) << 2) ^
           (static_cast<size_t>(k.first_microbatch) << 1) ^ static_cast<size_t>(k.phase);
  }
};

class ScopedGraphRunner final : public RegionRunner {
 public:
  // `registry` must outlive the runner. warmup_steps >= 0 (model.cuda_graph_warmup_steps).
  ScopedGraphRunner(ScopePlan plan, GraphRegistry& registry, int warmup_steps);

  // Bracket every training step. end_step synchronises `stream` only at the end of a step that
  // captured (to time it: GraphStats::capture_step_ms); other steps never wait.
  void begin_step();
  void end_step(cudaStream_t stream);
  // Leaves a step that threw (a region's body or its capture failed) without synchronising: the
  // runner is outside a step again, so the caller may report the error or step again (the step counts
  // as begun; a region whose capture failed is captured at its next run). No-op outside a step.
  void abort_step() noexcept;
  // One step: begin_step, `step` (which runs its regions through this runner), end_step. If `step`
  // throws, abort_step and rethrow: the caller sees the step's own error, and the next run_step starts
  // a step. GraphedStep runs its steps through here.
  void run_step(cudaStream_t stream, const RegionBody& step);

  void run(const RegionKey& key, cudaStream_t stream, const RegionBody& body) override;

  // Every graphed region is captured again at its next run; a re-capture with the same topology
  // updates the executable in place (cudaGraphExecUpdate).
  void recapture();

  bool graphs_active() const { return steps_begun_ > warmup_steps_; }  // current step graphs regions
  bool step_captured() const { return captured_this_step_; }
  const ScopePlan& plan() const { return plan_; }

 private:
  struct Entry {
    std::string name;     // region_name(key), cached
    bool graphed = false;
    bool stale = true;    // needs (re-)capture at its next run
    GraphExec* exec = nullptr;
  };
  Entry& entry(const RegionKey& key);

  ScopePlan plan_;
  GraphRegistry& registry_;
  int warmup_steps_;
  int64_t steps_begun_ = 0;
  bool in_step_ = false;
  bool captured_this_step_ = false;
  std::chrono::steady_clock::time_point step_start_;
  std::unordered_map<RegionKey, Entry, RegionKeyHash> entries_;
};

}  // namespace sg::graph
