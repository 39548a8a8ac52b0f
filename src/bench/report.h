#pragma once
// The bench's output: derived figures per mode, the table (stdout) and the JSON (--json FILE).
// Pure CPU: everything here is computed from BenchPlan + BenchResults.
//
// Columns (docs/performance.md explains them for users):
//   step ms / p90 ms   median and 90th percentile of the measured steps' CUDA-event times
//   tokens/s, TFLOP/s  tokens and model FLOPs (train/metrics.h) per step / median step time
//   MFU                TFLOP/s / the device's dense bf16 peak
//   host ms            median host wall time of one run() call: what the CPU spends enqueueing a step
//   floor ms           device-busy time per step from CUPTI (kernels, memsets, copies; the union of
//                      their intervals), measured in separate steps
//   step/floor         graph efficiency: median step time / floor (1.00x = no launch gaps at all)
//   capture ms         capture + instantiate of the mode's graphs (the graph runtime's own timers)
//   graphs, layers     graphs instantiated; graphable layers of all layers of the stack (a GPT
//                      block is two layers: attention, MLP)
//   peak mem           largest device memory in use seen during the mode (cudaMemGetInfo)
//   vs eager           peak mem minus eager's (impl none) peak, and that as % of eager's peak
// When a mode recomputes activations (--compare ...+recompute_full), and only then:
//   recompute          the setting it ran with (none, selective=core_attn, full=uniform/1)
//   step vs no recompute  median step time against the listed mode of the same graph keys without
//                      recompute, in %
//   peak vs no recompute  peak mem minus that mode's peak, and that as % of it
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "bench/bench_plan.h"
#include "bench/bench_results.h"
#include "bench/bench_stats.h"

namespace sg::bench {

struct ModeSummary {
  SampleStats step_ms;
  SampleStats host_ms;
  double mean_step_ms = kNotMeasured;  // window_ms / steps: includes any gap between steps
  double tokens_per_s = 0.0;
  double tflops = 0.0;
  double mfu = 0.0;                       // fraction; 0 when the peak is unknown
  std::optional<double> floor_ms;         // busy time per floor step: the median over the floor steps
  std::optional<double> floor_mean_ms;    // and the mean (one slow traced step moves it)
  std::optional<double> floor_sum_ms;     // sum of durations per floor step (== floor_ms on one stream)
  std::optional<double> efficiency;       // median step / floor
  std::optional<double> capture_total_ms; // capture + instantiate (modes that captured)
  std::optional<int64_t> graph_memory_bytes;       // memory after capture - before (modes that captured)
  std::optional<int64_t> overhead_vs_eager_bytes;  // peak - eager's peak (when impl none ran)
  std::optional<double> overhead_vs_eager_percent; // of eager's peak
  // Against the mode with the same CUDA-graph keys and recompute none (modes that recompute, when listed).
  std::optional<std::string> without_recompute;           // its label
  std::optional<double> step_vs_without_recompute_percent;  // median step time, + is slower
  std::optional<int64_t> peak_vs_without_recompute_bytes;   // peak mem, - is saved
  std::optional<double> peak_vs_without_recompute_percent;
};

struct BenchReport {
  std::vector<ModeSummary> modes;  // parallel to BenchResults::modes
  std::vector<std::string> notes;  // things the reader must know (no floor, dropped records, losses differ)
  bool losses_agree = true;        // every mode ended at the same loss, bit for bit (graphs and recompute
                                   // are bitwise equal to eager without recompute)
};

BenchReport summarize(const BenchPlan& plan, const BenchResults& results);

// The header lines (recipe, model, device, schedule) and the table, for stdout.
std::string format_report(const BenchPlan& plan, const BenchResults& results, const BenchReport& report);

// Everything, including every per-step sample, as JSON text.
std::string report_json(const BenchPlan& plan, const BenchResults& results, const BenchReport& report);

// "1.20 GiB (one allocation, shared by every mode)" or, with several memory plans,
// "1.20 GiB (none, local), 0.80 GiB (local+recompute_full): one per memory plan, each freed before the next".
std::string describe_arenas(const BenchResults& results);
// True when NVML sampled power in at least one mode (the table's power section and the HTML clock chart).
bool any_power_measured(const BenchResults& results);

// "+1.50 MiB", "-256 B", "0 B".
std::string signed_bytes(int64_t bytes);

}  // namespace sg::bench
