#pragma once
// Runs a BenchPlan on the GPU: one TrainStep (one memory plan, one arena) for each run of consecutive
// modes on one memory plan (modes that differ only in CUDA-graph keys share it; a different recompute
// setting is a different plan: the previous step and its arena are freed first, so every mode's peak
// memory is its own); per mode a fresh GraphedStep (the previous mode's graphs are destroyed first), the
// same initial state (TrainStep::load_state: initial weights, zero Adam moments, step 0, RNG offset 0)
// and the same mock batch. Per mode, in order:
//   1. warmup: model.cuda_graph_warmup_steps eager steps, not measured;
//   2. the capture step: captures (and launches) the graphs; timed and reported apart (impl none: one
//      more eager step, so every mode runs the same steps);
//   3. measured steps: each bracketed by CUDA events recorded on the step's stream (device time) and
//      by the host clock around GraphedStep::run() (enqueue time; nothing inside waits). At most two
//      steps are in flight — the host waits for step i-2 before enqueueing step i, outside both
//      timers — so a GPU-bound mode never waits on the host while host times stay free of launch-queue
//      back-pressure;
//   4. floor steps, spread evenly among the measured ones: each step alone in a CUPTI window
//      (kernel_timer.h), the device drained before and after it. CUPTI records nothing outside those
//      windows, so tracing never perturbs the timed steps, and the floor is measured in the same
//      stretch of time (clocks, temperature) as the steps it is compared with.
// Memory is sampled (cudaMemGetInfo) after warmup, after capture and at the end of each phase.
#include <cstdint>
#include <functional>
#include <string>

#include "core/error.h"
#include "bench/bench_plan.h"
#include "bench/bench_results.h"
#include "train/distributed_run.h"

namespace sg::bench {

// SIGINT/SIGTERM arrived: the run stopped between steps (graphs destroyed, nothing reported).
class BenchInterrupted : public Error {
 public:
  explicit BenchInterrupted(const std::string& message) : Error(message) {}
};

struct BenchProgress {
  std::function<void(const std::string&)> line;                   // a line that stays
  std::function<void(int64_t done, const std::string&)> update;   // steps done of all modes' steps
};

// Throws sg::Error "stepgraph bench needs a GPU ..." when there is none, BenchInterrupted on a signal,
// and whatever the step throws. With `distributed` (bench -ng N > 1: this process is one of N ranks) the
// step all-reduces its gradients with the other ranks and each rank measures its slice of the batch.
BenchResults run_bench(const BenchPlan& plan, const BenchProgress& progress,
                       train::DistributedRun* distributed = nullptr);

// The message for a machine without a usable GPU.
std::string no_gpu_message();

}  // namespace sg::bench
