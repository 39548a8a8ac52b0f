// The graph runtime's payoff on the toy step (tests/graph/toy_step.cuh, > 300 launches per step):
// step time eagerly, as one full-iteration graph and as region graphs, and the cost per launch.
// Each step is timed with CUDA events after warmup (and after the capture step); the table shows
// medians. Then the same for memset nodes: one graph of small kernels with a memset after every few,
// replayed with its memset nodes kept and lowered to fill kernels (graph/memset_nodes.h).
// Usage: build/bench/graph_runtime_bench [--steps N] [--warmup N] (--help: the flags). Prints tables; writes
// nothing.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "../tests/graph/toy_step.cuh"
#include "bench_args.h"
#include "bench_device.h"
#include "core/error.h"
#include "cuda/check.h"
#include "cuda/device.h"
#include "cuda/stream.h"
#include "graph/full_iteration_runner.h"
#include "graph/memset_nodes.h"
#include "graph/registry.h"
#include "graph/scope_plan.h"
#include "graph/scoped_runner.h"

namespace {

using namespace sg;
using namespace sg::graph;

struct ModeResult {
  std::string name;
  double step_ms = 0.0;   // median device time per step (events)
  double host_ms = 0.0;   // median host time to enqueue one step
  int launches = 0;
  GraphStats stats;
};

using bench::median;

// Times `steps` steps after `warmup` untimed ones; step() enqueues one step and returns its launches.
template <class StepFn>
ModeResult time_mode(const std::string& name, int warmup, int steps, cuda::Stream& stream, StepFn&& step) {
  ModeResult r;
  r.name = name;
  cuda::Event start(true), stop(true);
  for (int i = 0; i < warmup; ++i) r.launches = step();
  stream.synchronize();
  std::vector<double> device_ms, host_ms;
  for (int i = 0; i < steps; ++i) {
    start.record(stream);
    const auto t0 = std::chrono::steady_clock::now();
    r.launches = step();
    const auto t1 = std::chrono::steady_clock::now();
    stop.record(stream);
    device_ms.push_back(cuda::Event::elapsed_ms(start, stop));
    host_ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  r.step_ms = median(device_ms);
  r.host_ms = median(host_ms);
  return r;
}

__global__ void scale_by_two(float* x, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= 2.0f;
}

// Median replay time of `exec` over `steps` launches after `warmup`, CUDA events around each launch.
double median_replay_ms(cudaGraphExec_t exec, cuda::Stream& stream, int warmup, int steps) {
  for (int i = 0; i < warmup; ++i) SG_CUDA_CHECK(cudaGraphLaunch(exec, stream.get()));
  stream.synchronize();
  cuda::Event start(true), stop(true);
  std::vector<double> ms;
  for (int i = 0; i < steps; ++i) {
    start.record(stream);
    SG_CUDA_CHECK(cudaGraphLaunch(exec, stream.get()));
    stop.record(stream);
    ms.push_back(cuda::Event::elapsed_ms(start, stop));
  }
  return median(ms);
}

// A graph of `kernels` small kernels with a 4-byte memset (like cuDNN's) after every `every`-th one,
// replayed as captured and with its memset nodes lowered; prints one line per variant.
void memset_node_table(cuda::Stream& stream, int warmup, int steps) {
  constexpr int kKernels = 128, kEvery = 8, kElements = 4096;
  float* x = nullptr;
  int* counter = nullptr;
  SG_CUDA_CHECK(cudaMalloc(&x, kElements * sizeof(float)));
  SG_CUDA_CHECK(cudaMalloc(&counter, sizeof(int)));
  SG_CUDA_CHECK(cudaStreamBeginCapture(stream.get(), cudaStreamCaptureModeThreadLocal));
  for (int k = 0; k < kKernels; ++k) {
    scale_by_two<<<(kElements + 255) / 256, 256, 0, stream.get()>>>(x, kElements);
    SG_CUDA_CHECK_LAUNCH("scale_by_two");
    if (k % kEvery == kEvery - 1) SG_CUDA_CHECK(cudaMemsetAsync(counter, 0, sizeof(int), stream.get()));
  }
  cudaGraph_t kept = nullptr, lowered = nullptr;
  SG_CUDA_CHECK(cudaStreamEndCapture(stream.get(), &kept));
  SG_CUDA_CHECK(cudaGraphClone(&lowered, kept));
  const int memsets = lower_memset_nodes(lowered);
  cudaGraphExec_t kept_exec = nullptr, lowered_exec = nullptr;
  SG_CUDA_CHECK(cudaGraphInstantiate(&kept_exec, kept, 0));
  SG_CUDA_CHECK(cudaGraphInstantiate(&lowered_exec, lowered, 0));
  const double kept_ms = median_replay_ms(kept_exec, stream, warmup, steps);
  const double lowered_ms = median_replay_ms(lowered_exec, stream, warmup, steps);
  std::printf("\nmemset nodes: %d kernels + %d 4-byte memsets in one graph, median replay of %d\n", kKernels, memsets,
              steps);
  std::printf("%-26s %14s %14s\n", "variant", "replay (ms)", "vs kept");
  std::printf("%-26s %14.4f %13.2fx\n", "memset nodes kept", kept_ms, 1.0);
  std::printf("%-26s %14.4f %13.2fx\n", "lowered to fill kernels", lowered_ms, kept_ms / lowered_ms);
  std::printf("lowering saves %.2f us per memset node\n", 1000.0 * (kept_ms - lowered_ms) / std::max(memsets, 1));
  SG_CUDA_CHECK(cudaGraphExecDestroy(kept_exec));
  SG_CUDA_CHECK(cudaGraphExecDestroy(lowered_exec));
  SG_CUDA_CHECK(cudaGraphDestroy(kept));
  SG_CUDA_CHECK(cudaGraphDestroy(lowered));
  SG_CUDA_CHECK(cudaFree(x));
  SG_CUDA_CHECK(cudaFree(counter));
}

int run(int argc, char** argv) {
  const bench::ToolArgs args = bench::read_tool_args(
      argc, argv,
      {.program = "graph_runtime_bench",
       .about = "The graph runtime's payoff on the toy step (tests/graph/toy_step.cuh, > 300 launches per step):\n"
                "median step time eagerly, as one full-iteration graph and as region graphs [attn,mlp], and the cost\n"
                "per launch (CUDA events per step, after warmup and the capture step); then a graph of small kernels\n"
                "with memset nodes kept and lowered to fill kernels. Prints tables; writes nothing. Needs a CUDA GPU.",
       .flags = {{.name = "--steps", .default_value = "200", .min = 1, .max = 1000000, .help = "timed steps per mode"},
                 {.name = "--warmup", .default_value = "10", .min = 2, .max = 1000000,
                  .help = "steps before the timed ones: one eager step, then the capture, then replays"}}});
  const int steps = static_cast<int>(args.integer("--steps"));
  const int warmup = static_cast<int>(args.integer("--warmup"));
  if (cuda::device_count() == 0) {
    std::fprintf(stderr, "graph_runtime_bench needs a CUDA GPU\n");
    return 1;
  }

  toy::ToyConfig cfg;
  toy::ToyStep toy(cfg);
  cuda::Stream stream;
  EagerRegionRunner eager;
  std::vector<ModeResult> results;

  toy.reset();
  results.push_back(time_mode("eager", warmup, steps, stream, [&] { return toy.enqueue(stream, eager); }));

  toy.reset();
  {
    GraphRegistry registry;
    FullIterationRunner runner(registry, 1);  // step 0 eager, step 1 captures: both in the warmup
    int launches = 0;
    auto step = [&] {
      runner.run_step(stream, [&](cudaStream_t s) { launches = toy.enqueue(s, eager); });
      return launches;
    };
    results.push_back(time_mode("full-iteration graph", warmup, steps, stream, step));
    results.back().stats = registry.stats();
  }

  toy.reset();
  {
    GraphRegistry registry;
    ScopedGraphRunner runner(
        // The toy's backward regions have no first-microbatch variant: planned as one microbatch.
        plan_graph_scopes(GraphImpl::transformer_engine, {GraphScope::attn, GraphScope::mlp}, toy.layer_regions(), 1),
        registry, 1);
    auto step = [&] {
      runner.begin_step();
      const int launches = toy.enqueue(stream, runner);
      runner.end_step(stream);
      return launches;
    };
    results.push_back(time_mode("region graphs [attn,mlp]", warmup, steps, stream, step));
    results.back().stats = registry.stats();
  }

  const cuda::DeviceProperties& dev = cuda::device_properties();
  std::printf("toy step: %d layers x %d microbatches, %d launches/step, [%d x %d] fp32, %s\n", cfg.layers,
              cfg.microbatches, results[0].launches, cfg.rows, cfg.features, dev.summary().c_str());
  std::printf("median of %d steps after %d warmup steps (CUDA events per step)\n\n", steps, warmup);
  std::printf("%-26s %14s %14s %14s %10s\n", "mode", "step (ms)", "enqueue (ms)", "us/launch", "vs eager");
  for (const ModeResult& r : results) {
    std::printf("%-26s %14.3f %14.3f %14.3f %9.2fx\n", r.name.c_str(), r.step_ms, r.host_ms,
                1000.0 * r.step_ms / std::max(r.launches, 1), results[0].step_ms / r.step_ms);
  }
  std::printf("\n");
  for (size_t i = 1; i < results.size(); ++i) {
    std::printf("%s: %s\n", results[i].name.c_str(), results[i].stats.summary().c_str());
  }
  memset_node_table(stream, warmup, steps);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const sg::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
