#pragma once
// What one `stepgraph bench` run measured: plain data, filled by bench_runner (GPU) and turned into the
// table and JSON by report (pure CPU, unit-tested on made-up results).
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "bench/device_activity.h"
#include "bench/power_summary.h"

namespace sg::bench {

inline constexpr double kNotMeasured = std::numeric_limits<double>::quiet_NaN();

struct ModeResult {
  std::string label;               // "transformer_engine:attn+mlp"
  std::string impl;                // model.cuda_graph_impl as run
  std::vector<std::string> scope;  // model.cuda_graph_scope as run (normalized)
  std::string recompute = "none";  // as run, spelled as in --compare: none, selective=core_attn, full=uniform/1
  std::string description;         // train::GraphedStep::describe()

  // The measured steps, after warmup and the capture step.
  std::vector<double> step_ms;  // per step: CUDA events recorded just before and after run()
  std::vector<double> host_ms;  // per step: host wall time of run() (enqueueing, no sync inside)
  // Sum over the runs of measured steps between floor steps of first start event to last end event.
  double window_ms = kNotMeasured;
  // Board power and SM clock sampled (NVML) while the measured steps ran, floor steps included.
  PowerSummary power;

  // The capture step (the step after warmup; for impl none just one more eager step, not reported).
  bool captured = false;
  double capture_step_ms = kNotMeasured;       // its CUDA-event time
  double capture_step_host_ms = kNotMeasured;  // host wall time of its run(): capture + instantiate + a sync
  double capture_ms = 0.0;                     // graph runtime: host time spent capturing
  double instantiate_ms = 0.0;                 // graph runtime: instantiate + upload

  // Graphs, from GraphedStep::stats() and plan() after the run.
  int graphs_created = 0;
  int graphs_live = 0;
  int graphable_regions = 0;
  int graphable_layers = 0;
  int total_layers = 0;
  uint64_t graph_nodes = 0;
  uint64_t graph_kernel_nodes = 0;
  uint64_t graph_memset_nodes_lowered = 0;  // of those kernel nodes, captured memsets (graph/memset_nodes.h)
  uint64_t graph_memset_nodes_hoisted = 0;  // library workspace memsets moved up (graph/workspace_memsets.h)
  uint64_t replays = 0;

  // Kernel-time floor: floor_steps extra steps spread among the measured ones, each alone in its own
  // CUPTI window (the device drained before and after it).
  int floor_steps = 0;
  ActivitySummary floor;  // summed over the floor steps
  std::vector<double> floor_step_ms;  // per floor step: its busy time (the floor is their median)
  uint64_t dropped_records = 0;

  // Device memory in use (cudaMemGetInfo total - free), bytes.
  uint64_t memory_before_capture = 0;  // after the warmup steps
  uint64_t memory_after_capture = 0;
  uint64_t memory_peak = 0;            // the largest of every sample taken during the mode
  uint64_t arena_bytes = 0;            // the TrainStep's arena this mode ran on
  size_t memory_plan = 0;              // BenchPlan::memory_plans index: modes of one plan share the arena
  // Activations of one microbatch as planned on the CPU (model/activation_account.h): with this mode's
  // recompute settings (kept + recompute buffers) and without recompute.
  uint64_t activation_bytes = 0;
  uint64_t activation_bytes_without_recompute = 0;

  // The last step's device scalars: every mode runs the same steps from the same state.
  double final_loss = kNotMeasured;
  int64_t optimizer_steps = 0;

  std::vector<ActivityRecord> trace;  // the first floor step, names kept (--trace only)
};

struct BenchEnvironment {
  std::string device_name;     // "NVIDIA H200"
  std::string device_summary;  // "NVIDIA H200 (sm_90, 132 SMs, 139.8 GiB)"
  uint64_t device_total_memory = 0;
  double peak_tflops = 0.0;    // dense bf16, from the device name (train/metrics.h); 0 unknown
  int driver_version = 0;      // cudaDriverGetVersion
  int runtime_version = 0;     // cudaRuntimeGetVersion
  std::string cupti_version;   // "" when no floor was measured
  std::string cupti_error;     // why there is no floor although --floor-steps > 0 ("" when there is one)
  uint64_t arena_bytes = 0;    // the largest TrainStep arena (one per memory plan; ModeResult has each mode's)
};

struct BenchResults {
  BenchEnvironment env;
  std::vector<ModeResult> modes;  // in run order
};

// A mode's kernel-time floor, as the table, the JSON and the run's progress line give it: the median of the floor
// steps' busy times (one traced step that ran slow must not move it), or their mean where the per-step times are
// missing; none without floor steps or kernel records.
std::optional<double> floor_median_ms(const ModeResult& m);

}  // namespace sg::bench
