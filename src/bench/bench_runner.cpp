#include "bench/bench_runner.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <vector>

#include "bench/bench_stats.h"
#include "bench/kernel_timer.h"
#include "bench/power_sampler.h"
#include "bench/report.h"
#include "config/graph_keys.h"
#include "core/signal_name.h"
#include "core/strings.h"
#include "cuda/check.h"
#include "cuda/device.h"
#include "cuda/nvtx.h"
#include "cuda/stream.h"
#include "data/batch.h"
#include "data/rank_batch.h"
#include "graph/registry.h"
#include "model/gradient_readiness.h"
#include "model/init.h"
#include "model/layer_registry.h"
#include "model/train_step.h"
#include "train/distributed_run.h"
#include "train/graphed_step.h"
#include "train/metrics.h"

namespace sg::bench {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kMaxStepsInFlight = 2;
constexpr double kProgressIntervalSeconds = 0.25;  // redraws inside the measured loop, at most this often

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

uint64_t device_memory_used() {
  size_t free_bytes = 0, total_bytes = 0;
  SG_CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  return total_bytes - free_bytes;
}

// Uninstalls the stop handlers on every way out.
struct StopHandlers {
  StopHandlers() { graph::install_stop_handlers(); }
  ~StopHandlers() { graph::uninstall_stop_handlers(); }
};

// This rank's rows of one global mock batch, the same for every step of every mode (dataset.mock: seeded
// random tokens; data/rank_batch.h).
model::HostBatch mock_batch(const BenchPlan& plan, int rank) {
  data::DataLoaderOptions options;
  options.mock = true;
  options.seq_length = plan.model.seq_length;
  options.vocab_size = plan.model.vocab_size;
  options.seed = plan.seed;
  data::DataLoader loader(options);
  const size_t n = static_cast<size_t>(plan.batch.num_microbatches * plan.batch.tokens_per_microbatch(plan.model));
  model::HostBatch batch;
  batch.tokens.resize(n);
  batch.targets.resize(n);
  batch.loss_mask.resize(n);
  const int64_t global = plan.batch.global_microbatches() * plan.batch.micro_batch_size;
  const data::RankRows rows = data::rank_rows(global, plan.batch.data_parallel_size, rank);
  data::HostBatchView view{batch.tokens.data(), batch.targets.data(), batch.loss_mask.data(), rows.count,
                           plan.model.seq_length};
  data::fill_rank_batch(loader, view, global, rows);
  return batch;
}

// Progress over all modes' steps, and the stop check between steps.
class Tracker {
 public:
  Tracker(const BenchPlan& plan, const BenchProgress& progress) : plan_(plan), progress_(progress) {}

  void set_mode(size_t index, const std::string& label) {
    prefix_ = strprintf("[%zu/%zu] %s", index + 1, plan_.modes.size(), label.c_str());
  }
  void line(const std::string& text) const {
    if (progress_.line) progress_.line(prefix_ + ": " + text);
  }
  // After every step; `throttled` (inside the measured loop) redraws at most every kProgressIntervalSeconds.
  void step_done(const std::string& phase, int done, int total, bool throttled, cudaStream_t stream) {
    ++steps_done_;
    const auto now = Clock::now();
    if (progress_.update && (!throttled || done == total ||
                             std::chrono::duration<double>(now - last_update_).count() >= kProgressIntervalSeconds)) {
      progress_.update(steps_done_, strprintf("%s: %s %d/%d", prefix_.c_str(), phase.c_str(), done, total));
      last_update_ = now;
    }
    if (graph::stop_requested()) {
      // Let the enqueued work finish so the graphs and the arena are released from an idle device. A failure is
      // logged, and the stop the signal asked for goes on.
      SG_CUDA_CHECK_NOEXCEPT(cudaStreamSynchronize(stream));
      throw BenchInterrupted(strprintf("stepgraph bench stopped by %s during %s",
                                       signal_name(graph::stop_signal()).c_str(), prefix_.c_str()));
    }
  }

 private:
  const BenchPlan& plan_;
  const BenchProgress& progress_;
  std::string prefix_;
  int64_t steps_done_ = 0;
  Clock::time_point last_update_{};
};

void expect_mode(graph::StepMode got, graph::StepMode want, const std::string& label, const char* phase, int index) {
  SG_CHECK(got == want, strprintf("mode %s: %s step %d ran as %s, expected %s (the graph schedule and the bench "
                                  "disagree on model.cuda_graph_warmup_steps)",
                                  label.c_str(), phase, index + 1, graph::step_mode_name(got),
                                  graph::step_mode_name(want)));
}

struct SharedState {
  model::TrainStep& step;
  cuda::Stream& stream;
  const std::vector<float>& weights;
  KernelTimer* timer;  // null when --floor-steps 0
  PowerSampler& power;
  train::DistributedRun* distributed;  // null for one process
};

ModeResult run_mode(const BenchPlan& plan, const PlannedMode& planned, SharedState& shared, Tracker& tracker) {
  model::TrainStep& step = shared.step;
  cuda::Stream& stream = shared.stream;
  ModeResult r;
  r.label = planned.label;
  r.impl = planned.config.model.cuda_graph_impl;
  r.scope = planned.config.model.cuda_graph_scope;
  r.recompute = planned.recompute;
  r.memory_plan = planned.memory_plan;
  const model::ActivationAccount& activations = plan.memory_plans[planned.memory_plan].activations;
  r.activation_bytes = activations.with_recompute();
  r.activation_bytes_without_recompute = activations.without_recompute();
  const bool graphs = !config::graph_impl_is(planned.config.model, graph::GraphImpl::none);
  const graph::StepMode steady = graphs ? graph::StepMode::replay : graph::StepMode::eager;
  cuda::NvtxRange mode_range("bench mode " + r.label);

  // Every mode starts from the same state, so all of them run the very same training steps.
  const model::FlatView zeros = model::FlatView::zeros(static_cast<int64_t>(shared.weights.size()));
  step.load_state(stream, shared.weights, zeros, zeros, 0, rng::RngState{plan.seed, 0});
  train::GraphedStep graphed(step, r.impl, r.scope, plan.warmup_steps);
  if (shared.distributed) graphed.set_capture_check(shared.distributed->capture_check());
  r.description = graphed.describe();
  tracker.line(r.description);

  uint64_t peak = device_memory_used();
  const auto sample_memory = [&peak]() {
    const uint64_t used = device_memory_used();
    peak = std::max(peak, used);
    return used;
  };

  {  // 1. warmup
    cuda::NvtxRange range("warmup");
    for (int i = 0; i < plan.warmup_steps; ++i) {
      expect_mode(graphed.run(stream), graph::StepMode::eager, r.label, "warmup", i);
      tracker.step_done("warmup", i + 1, plan.warmup_steps, false, stream);
    }
    stream.synchronize();
  }
  r.memory_before_capture = sample_memory();

  {  // 2. the capture step
    SG_CHECK(graphed.next_step_captures() == graphs,
             strprintf("mode %s: the step after %d warmup steps %s capture", r.label.c_str(), plan.warmup_steps,
                       graphs ? "does not" : "would"));
    cuda::NvtxRange range("capture step");
    cuda::Event start(true), end(true);
    start.record(stream);
    const auto t0 = Clock::now();
    const graph::StepMode mode = graphed.run(stream);
    const auto t1 = Clock::now();
    end.record(stream);
    const double event_ms = cuda::Event::elapsed_ms(start, end);
    expect_mode(mode, graphs ? graph::StepMode::capture : graph::StepMode::eager, r.label, "capture", 0);
    r.captured = mode == graph::StepMode::capture;
    if (r.captured) {
      r.capture_step_ms = event_ms;
      r.capture_step_host_ms = ms_between(t0, t1);
    }
    tracker.step_done("capture", 1, 1, false, stream);
  }
  r.memory_after_capture = sample_memory();
  if (r.captured) {
    const graph::GraphStats s = graphed.stats();
    tracker.line(strprintf("captured %d graph%s: capture %.1f ms + instantiate %.1f ms; device memory %s",
                           s.graphs_live, s.graphs_live == 1 ? "" : "s", s.capture_ms, s.instantiate_ms,
                           signed_bytes(static_cast<int64_t>(r.memory_after_capture) -
                                        static_cast<int64_t>(r.memory_before_capture))
                               .c_str()));
  }

  {  // 3. measured steps, and the floor steps (CUPTI) spread evenly among them
    const int n = plan.steps;
    // Without CUPTI (another profiler attached) the floor steps still run, untraced: every mode runs
    // plan.steps_per_mode() steps either way, so the progress total and the loss comparison hold.
    const int floor_steps = plan.floor_steps;
    const bool traced = shared.timer != nullptr;
    // Floor step j runs just before measured step (j+1)*n/(floor_steps+1): the floor is measured in
    // the same stretch of time (clocks, temperature) as the steps it is compared with.
    const auto floor_position = [&](int j) { return static_cast<int>((int64_t{j} + 1) * n / (floor_steps + 1)); };
    std::vector<cuda::Event> starts, ends;
    starts.reserve(static_cast<size_t>(n));
    ends.reserve(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) {
      starts.emplace_back(true);
      ends.emplace_back(true);
    }
    r.host_ms.assign(static_cast<size_t>(n), 0.0);
    const uint64_t dropped_before = traced ? shared.timer->dropped_records() : 0;
    int floor_done = 0;
    int segment_start = 0;  // first measured step since the last floor step
    double window_ms = 0.0;
    cuda::NvtxRange range("measured steps");
    shared.power.start();
    for (int i = 0; i < n; ++i) {
      while (floor_done < floor_steps && floor_position(floor_done) == i) {
        // The traced step runs alone: drain the timed steps in flight, trace one step, synchronise.
        stream.synchronize();
        if (i > segment_start) window_ms += cuda::Event::elapsed_ms(starts[static_cast<size_t>(segment_start)],
                                                                    ends[static_cast<size_t>(i - 1)]);
        segment_start = i;
        cuda::NvtxRange floor_range(traced ? "floor step (CUPTI)" : "floor step (no CUPTI)");
        if (traced) {
          const bool keep = plan.trace && floor_done == 0;
          shared.timer->begin(keep);
          const graph::StepMode mode = graphed.run(stream);
          std::vector<ActivityRecord> records = shared.timer->end();  // synchronises the device
          expect_mode(mode, steady, r.label, "floor", floor_done);
          const ActivitySummary summary = summarize_activity(records);
          r.floor += summary;
          r.floor_step_ms.push_back(static_cast<double>(summary.busy_ns) / 1e6);
          if (keep) r.trace = std::move(records);
        } else {
          expect_mode(graphed.run(stream), steady, r.label, "floor", floor_done);
          stream.synchronize();
        }
        ++floor_done;
        tracker.step_done("floor", floor_done, floor_steps, true, stream);
      }
      if (i >= segment_start + kMaxStepsInFlight) ends[static_cast<size_t>(i - kMaxStepsInFlight)].synchronize();
      starts[static_cast<size_t>(i)].record(stream);
      const auto t0 = Clock::now();
      const graph::StepMode mode = graphed.run(stream);
      const auto t1 = Clock::now();
      ends[static_cast<size_t>(i)].record(stream);
      r.host_ms[static_cast<size_t>(i)] = ms_between(t0, t1);
      expect_mode(mode, steady, r.label, "measured", i);
      tracker.step_done("measure", i + 1, n, true, stream);
    }
    r.step_ms.resize(static_cast<size_t>(n));
    for (size_t i = 0; i < static_cast<size_t>(n); ++i) r.step_ms[i] = cuda::Event::elapsed_ms(starts[i], ends[i]);
    r.power = shared.power.stop();  // after the last step's end event: the samples cover every measured step
    if (n > segment_start) {
      window_ms += cuda::Event::elapsed_ms(starts[static_cast<size_t>(segment_start)], ends.back());
    }
    r.window_ms = window_ms;
    r.floor_steps = traced ? floor_done : 0;
    if (traced) r.dropped_records = shared.timer->dropped_records() - dropped_before;
  }

  stream.synchronize();
  sample_memory();
  r.memory_peak = peak;
  const graph::GraphStats stats = graphed.stats();
  r.capture_ms = stats.capture_ms;
  r.instantiate_ms = stats.instantiate_ms;
  r.graphs_created = stats.graphs_created;
  r.graphs_live = stats.graphs_live;
  r.graphable_regions = stats.graphable_regions;
  r.graph_nodes = stats.nodes;
  r.graph_kernel_nodes = stats.kernel_nodes;
  r.graph_memset_nodes_lowered = stats.memset_nodes_lowered;
  r.graph_memset_nodes_hoisted = stats.memset_nodes_hoisted;
  r.replays = stats.replays;
  r.graphable_layers = graphed.plan().graphable_layers;
  r.total_layers = graphed.plan().total_layers;

  const model::StepScalars scalars = step.download_scalars(stream);
  r.final_loss = scalars.loss;
  r.optimizer_steps = scalars.steps_done;
  SG_CHECK(r.optimizer_steps == plan.steps_per_mode(),
           strprintf("mode %s: the device step counter says %lld optimizer steps after %lld steps run", r.label.c_str(),
                     static_cast<long long>(r.optimizer_steps), static_cast<long long>(plan.steps_per_mode())));
  return r;  // `graphed` is destroyed here: this mode's graphs are gone before the next mode starts
}

// "arena 1.20 GiB planned once for 4 modes" or "arena 0.90 GiB for local+recompute_full (memory plan 2 of 3)".
std::string arena_line(const BenchPlan& plan, size_t memory_plan, uint64_t bytes) {
  const std::vector<size_t>& modes = plan.memory_plans[memory_plan].modes;
  if (plan.memory_plans.size() == 1) {
    return strprintf("arena %s planned once for %zu mode%s", human_bytes(bytes).c_str(), modes.size(),
                     modes.size() == 1 ? "" : "s");
  }
  std::vector<std::string> labels;
  for (size_t i : modes) labels.push_back(plan.modes[i].label);
  return strprintf("arena %s for %s (memory plan %zu of %zu; the previous arena is freed)", human_bytes(bytes).c_str(),
                   join(labels, ", ").c_str(), memory_plan + 1, plan.memory_plans.size());
}

}  // namespace

std::string no_gpu_message() {
  return "stepgraph bench needs a GPU: no CUDA device is visible (check nvidia-smi, the driver and "
         "CUDA_VISIBLE_DEVICES). `stepgraph bench ... --dryrun` validates the configuration without one.";
}

namespace {

// Data parallel: a rank whose modes fail (a signal to this rank alone included) says why, tells the others (they end
// at once) and ends with the status the command would give, without releasing its step: its stream may wait in a
// collective the others left (train::DistributedRun::end_failed_rank).
[[noreturn]] void end_failed_bench_rank(train::DistributedRun& distributed, const std::exception& e) {
  const bool interrupted = dynamic_cast<const BenchInterrupted*>(&e) != nullptr;
  std::fprintf(stderr, interrupted ? "%s; no report written\n" : "error: %s\n", e.what());
  distributed.end_failed_rank(e.what(), interrupted ? graph::exit_code_for_stop() : 1);
}

}  // namespace

BenchResults run_bench(const BenchPlan& plan, const BenchProgress& progress, train::DistributedRun* distributed) {
  if (cuda::device_count() == 0) throw Error(no_gpu_message());
  SG_CHECK(!plan.modes.empty(), "stepgraph bench: no mode to run");
  StopHandlers stop_handlers;

  // CUPTI attaches before any graph exists, so graphs instantiated later are traced like eager kernels.
  // An empty window proves it works; when it does not (another CUPTI client such as Nsight Systems is
  // attached, or no libcupti), the bench runs on without the floor and says why.
  std::unique_ptr<KernelTimer> timer;
  std::string cupti_error;
  if (plan.floor_steps > 0) {
    try {
      timer = std::make_unique<KernelTimer>();
      timer->begin(false);
      timer->end();
    } catch (const Error& e) {
      timer.reset();
      cupti_error = e.what();
    }
  }

  BenchResults results;
  const cuda::DeviceProperties& device = cuda::device_properties();
  results.env.device_name = device.name;
  results.env.device_summary = device.summary();
  results.env.device_total_memory = device.total_memory;
  results.env.peak_tflops = train::peak_bf16_tflops(device.name);
  SG_CUDA_CHECK(cudaDriverGetVersion(&results.env.driver_version));
  SG_CUDA_CHECK(cudaRuntimeGetVersion(&results.env.runtime_version));
  if (timer) results.env.cupti_version = KernelTimer::version();
  results.env.cupti_error = cupti_error;
  if (!cupti_error.empty() && progress.line) progress.line("no kernel-time floor: " + cupti_error);

  PowerSampler power(plan.power);  // NVML; without it the modes report "not sampled" and why
  if (plan.power && !power.available() && progress.line) {
    progress.line("no power and clock samples: " + power.unavailable());
  }

  Tracker tracker(plan, progress);
  cuda::Stream stream;
  // Data parallel: the reducer outlives the step, and the step every mode's graphs.
  std::unique_ptr<dist::GradientReducer> reducer;
  if (distributed) {
    // The bench evaluates nothing: only a whole-step graph (impl local) captures a collective.
    bool any_local = false;
    for (const PlannedMode& m : plan.modes) {
      any_local = any_local || config::graph_impl_is(m.config.model, graph::GraphImpl::local);
    }
    const model::ModelLayout layout = model::model_layout(plan.model);
    reducer = distributed->make_step_reducer(plan.modes.front().config, layout.total(),
                                             model::gradient_readiness(layout), any_local);
  }
  model::TrainStepOptions step_options;
  step_options.reducer = reducer.get();
  const model::HostBatch batch = mock_batch(plan, distributed ? distributed->rank() : 0);
  if (progress.line) {
    progress.line(strprintf("stepgraph bench %s on %s: %zu mode%s, %zu memory plan%s", plan.recipe.c_str(),
                            results.env.device_summary.c_str(), plan.modes.size(), plan.modes.size() == 1 ? "" : "s",
                            plan.memory_plans.size(), plan.memory_plans.size() == 1 ? "" : "s"));
  }
  // One TrainStep per run of consecutive modes on one memory plan: a mode whose recompute settings plan
  // the activations differently gets its own arena, allocated after the previous one is freed, so its
  // peak memory is its own (bench_plan.h).
  std::unique_ptr<model::TrainStep> step;
  std::optional<size_t> step_plan;
  std::vector<float> weights;
  try {
    for (size_t i = 0; i < plan.modes.size(); ++i) {
      const PlannedMode& planned = plan.modes[i];
      tracker.set_mode(i, planned.label);
      if (step_plan != planned.memory_plan) {
        if (step) {
          stream.synchronize();
          step.reset();  // frees the previous arena before the next one is allocated
        }
        step = std::make_unique<model::TrainStep>(planned.model, plan.batch, plan.optimizer, plan.seed, step_options);
        step_plan = planned.memory_plan;
        const uint64_t arena = step->arena().total_bytes();
        results.env.arena_bytes = std::max(results.env.arena_bytes, arena);
        if (progress.line) progress.line(arena_line(plan, planned.memory_plan, arena));
        if (weights.empty()) {
          weights = model::initial_parameters(step->layout(), plan.seed);
        }
        step->upload_batch(stream, batch);
      }
      SharedState shared{*step, stream, weights, timer.get(), power, distributed};
      results.modes.push_back(run_mode(plan, planned, shared, tracker));
      ModeResult& m = results.modes.back();
      m.arena_bytes = step->arena().total_bytes();
      const SampleStats step_ms = sample_stats(m.step_ms);
      const SampleStats host_ms = sample_stats(m.host_ms);
      std::string floor;
      if (const std::optional<double> floor_ms = floor_median_ms(m); floor_ms && *floor_ms > 0) {
        floor = strprintf("; floor %.3f ms (step/floor %.3fx)", *floor_ms, step_ms.median / *floor_ms);
      }
      tracker.line(strprintf("median step %.3f ms (p90 %.3f) over %zu steps; host %.3f ms per step%s; peak memory %s",
                             step_ms.median, step_ms.p90, step_ms.count, host_ms.median, floor.c_str(),
                             human_bytes(m.memory_peak).c_str()));
      if (m.power.measured()) tracker.line("power: " + describe_power(m.power));
    }
  } catch (const std::exception& e) {
    // Before `step` and `stream` are released: they may hold collectives the other ranks left.
    if (distributed) end_failed_bench_rank(*distributed, e);
    throw;
  }
  return results;
}

}  // namespace sg::bench
