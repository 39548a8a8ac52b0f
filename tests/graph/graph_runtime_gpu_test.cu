// The graph runtime on the GPU: the toy step (> 300 launches) run eagerly, as one full-iteration
// graph and as region graphs gives bitwise identical results over 20 steps; RNG draws in replay equal
// eager ones and the CPU mirror, and keep advancing; broken captures are explained; device memory
// returns to its baseline after graphs are destroyed.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "cuda/arena.h"
#include "cuda/device.h"
#include "cuda/stream.h"
#include "graph/capture.h"
#include "graph/full_iteration_runner.h"
#include "graph/registry.h"
#include "graph/scope_plan.h"
#include "graph/scoped_runner.h"
#include "graph/toy_step.cuh"

namespace sg::graph {
namespace {

using toy::first_bitwise_difference;
using toy::ToyConfig;
using toy::ToySnapshot;
using toy::ToyStep;

constexpr int kSteps = 20;
constexpr int kWarmup = 2;

std::string thrown_message(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

void expect_same(const ToySnapshot& a, const ToySnapshot& b, const std::string& what) {
  EXPECT_EQ(first_bitwise_difference(a.weights, b.weights), -1) << what << ": weights differ";
  EXPECT_EQ(first_bitwise_difference(a.x, b.x), -1) << what << ": activations differ";
  EXPECT_EQ(first_bitwise_difference(a.loss_history, b.loss_history), -1) << what << ": loss history differs";
  EXPECT_EQ(first_bitwise_difference(a.probe, b.probe), -1) << what << ": RNG draws differ";
  EXPECT_EQ(a.step, b.step) << what;
}

__global__ void add_one(float* x, int n) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] += 1.0f;
}

class GraphRuntime : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda::device_count() == 0) GTEST_SKIP() << "no GPU";
  }

  ToySnapshot run_eager(ToyStep& toy, cuda::Stream& stream) {
    toy.reset();
    EagerRegionRunner eager;
    for (int s = 0; s < kSteps; ++s) {
      cuda::StepGuard guard(strprintf("eager step %d", s));  // proves the step allocates/syncs nothing
      const int launches = toy.enqueue(stream, eager);
      EXPECT_GE(launches, 300) << "the toy step must have at least 300 launches";
    }
    stream.synchronize();
    return toy.snapshot();
  }

  ToySnapshot run_full(ToyStep& toy, cuda::Stream& stream, GraphStats& stats) {
    toy.reset();
    GraphRegistry registry;
    FullIterationRunner runner(registry, kWarmup);
    EagerRegionRunner eager;
    int launches = 0;
    for (int s = 0; s < kSteps; ++s) {
      const StepMode expected = s < kWarmup ? StepMode::eager : s == kWarmup ? StepMode::capture : StepMode::replay;
      EXPECT_EQ(runner.next_mode(), expected) << "step " << s;
      const StepMode mode = runner.run_step(stream, [&](cudaStream_t st) { launches = toy.enqueue(st, eager); });
      EXPECT_EQ(mode, expected) << "step " << s;
    }
    stream.synchronize();
    stats = registry.stats();
    EXPECT_GT(runner.capture_step_ms(), 0.0);
    // Every enqueued operation is a node; a cuBLASLt matmul may be more than one kernel.
    EXPECT_GE(stats.nodes, static_cast<uint64_t>(launches));
    EXPECT_GE(stats.kernel_nodes, static_cast<uint64_t>(launches) - 1 - 2 * toy.config().microbatches);
    return toy.snapshot();
  }

  ToySnapshot run_scoped(ToyStep& toy, cuda::Stream& stream, const std::vector<GraphScope>& scopes,
                         int recapture_at, GraphStats& stats) {
    toy.reset();
    GraphRegistry registry;
    // The toy's backward regions have no first-microbatch variant: planned as one microbatch.
    ScopedGraphRunner runner(plan_graph_scopes(GraphImpl::transformer_engine, scopes, toy.layer_regions(), 1), registry,
                             kWarmup);
    for (int s = 0; s < kSteps; ++s) {
      if (s == recapture_at) runner.recapture();
      runner.begin_step();
      toy.enqueue(stream, runner);
      runner.end_step(stream);
      EXPECT_EQ(runner.step_captured(), s == kWarmup || s == recapture_at) << "step " << s;
    }
    stream.synchronize();
    stats = registry.stats();
    return toy.snapshot();
  }
};

TEST_F(GraphRuntime, EagerFullAndRegionGraphsAreBitwiseIdentical) {
  ToyStep toy(ToyConfig{});
  cuda::Stream stream;
  const ToySnapshot eager = run_eager(toy, stream);

  // The reference itself is sane: 20 finite, changing losses; history past step 20 untouched.
  ASSERT_EQ(eager.step, static_cast<uint32_t>(kSteps));
  for (int s = 0; s < kSteps; ++s) ASSERT_TRUE(std::isfinite(eager.loss_history[s])) << "step " << s;
  EXPECT_NE(eager.loss_history[0], eager.loss_history[kSteps - 1]);
  EXPECT_TRUE(std::isnan(eager.loss_history[kSteps]));

  GraphStats full_stats;
  const ToySnapshot full = run_full(toy, stream, full_stats);
  expect_same(eager, full, "full-iteration graph");
  EXPECT_EQ(full_stats.graphs_created, 1);
  EXPECT_EQ(full_stats.graphable_regions, 1);
  EXPECT_EQ(full_stats.replays, static_cast<uint64_t>(kSteps - kWarmup));
  EXPECT_GT(full_stats.capture_step_ms, 0.0);

  // All regions graphed; re-captured at step 10 (same topology -> cudaGraphExecUpdate).
  GraphStats all_stats;
  const ToySnapshot all = run_scoped(toy, stream, {GraphScope::attn, GraphScope::mlp}, 10, all_stats);
  expect_same(eager, all, "region graphs [attn, mlp]");
  const int regions = 4 * toy.config().layers;
  EXPECT_EQ(all_stats.graphable_regions, regions);
  EXPECT_EQ(all_stats.graphs_created, regions);  // the re-capture did not instantiate again
  EXPECT_EQ(all_stats.graphs_updated, regions);
  EXPECT_EQ(all_stats.replays,
            static_cast<uint64_t>(regions) * toy.config().microbatches * (kSteps - kWarmup));

  // Only attention graphed: graphs replayed between eager MLP launches.
  GraphStats attn_stats;
  const ToySnapshot attn = run_scoped(toy, stream, {GraphScope::attn}, -1, attn_stats);
  expect_same(eager, attn, "region graphs [attn]");
  EXPECT_EQ(attn_stats.graphs_created, 2 * toy.config().layers);
  EXPECT_EQ(attn_stats.graphs_updated, 0);
}

TEST_F(GraphRuntime, RngDrawsInReplayMatchCpuMirrorAndKeepAdvancing) {
  const ToyConfig cfg;
  ToyStep toy(cfg);
  cuda::Stream stream;
  GraphStats stats;
  const ToySnapshot full = run_full(toy, stream, stats);

  cuda::RngTracker mirror(cfg.seed);
  for (int s = 0; s < kSteps; ++s) {
    for (int mb = 0; mb < cfg.microbatches; ++mb) {
      for (int g = 0; g < 2; ++g) {
        for (int k = 0; k < cfg.probe_draws; ++k) {
          const float got = full.probe[toy.probe_index(s, mb, g, k)];
          ASSERT_EQ(got, mirror.uniform(static_cast<size_t>(g), toy::kProbeSite, static_cast<uint64_t>(k)))
              << "step " << s << " microbatch " << mb << " generator " << g << " draw " << k;
        }
        if (s > 0) {  // advancing: a step's draws differ from the previous step's
          EXPECT_NE(full.probe[toy.probe_index(s, mb, g, 0)], full.probe[toy.probe_index(s - 1, mb, g, 0)]);
        }
      }
      mirror.advance_host();  // what launch_advance does on the device, once per microbatch
    }
  }

  // The device state advanced once per microbatch, in eager and replayed steps alike.
  toy.rng().download();
  for (size_t g = 0; g < toy.rng().size(); ++g) {
    EXPECT_EQ(toy.rng().host_state(g).offset, static_cast<uint64_t>(kSteps * cfg.microbatches));
    EXPECT_EQ(toy.rng().host_state(g).offset, mirror.host_state(g).offset);
  }

  // Checkpoint bytes round-trip through device memory.
  const std::vector<uint8_t> bytes = toy.rng().save();
  cuda::RngTracker restored(cfg.seed + 1);
  restored.allocate_device();
  restored.restore(bytes);
  restored.host_state(0).offset = 0;  // clobber the host copy: download must bring the device values back
  restored.download();
  for (size_t g = 0; g < restored.size(); ++g) {
    EXPECT_EQ(restored.host_state(g).seed, toy.rng().host_state(g).seed);
    EXPECT_EQ(restored.host_state(g).offset, toy.rng().host_state(g).offset);
  }

  // The advance kernel inside a graph keeps advancing on every replay.
  GraphRegistry registry;
  GraphExec& exec = registry.capture("rng advance", stream, [&](cudaStream_t s) { restored.launch_advance(s, 3); });
  for (int i = 0; i < 5; ++i) registry.launch(exec, stream);
  stream.synchronize();
  restored.download();
  EXPECT_EQ(restored.host_state(1).offset, static_cast<uint64_t>(kSteps * cfg.microbatches + 15));
}

TEST_F(GraphRuntime, BrokenCaptureIsExplained) {
  cuda::Stream stream;
  float* buffer = static_cast<float*>(cuda::device_allocate(256 * sizeof(float), "test buffer"));
  GraphRegistry registry;
  const std::string region = region_name({0, Module::attn, Phase::forward});

  auto expect_explained = [&](const std::string& msg, const std::string& specific) {
    EXPECT_NE(msg.find("CUDA-graph capture of " + region + " failed"), std::string::npos) << msg;
    EXPECT_NE(msg.find("usual causes"), std::string::npos) << msg;
    EXPECT_NE(msg.find(specific), std::string::npos) << msg;
    EXPECT_FALSE(stream_is_capturing(stream)) << "the failed capture was not closed";
    EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "the failed capture left an error behind";
  };

  // A raw cudaMalloc, checked like production code checks it.
  void* leaked = nullptr;
  expect_explained(thrown_message([&] {
                     registry.capture(region, stream, [&](cudaStream_t s) {
                       add_one<<<1, 256, 0, s>>>(buffer, 256);
                       SG_CUDA_CHECK(cudaMalloc(&leaked, 1024));
                     });
                   }),
                   "cudaErrorStreamCapture");
  if (leaked != nullptr) SG_CUDA_CHECK(cudaFree(leaked));

  // A host synchronisation whose error nobody checks: the capture is invalidated and the end says so.
  expect_explained(thrown_message([&] {
                     registry.capture(region, stream, [&](cudaStream_t s) {
                       add_one<<<1, 256, 0, s>>>(buffer, 256);
                       (void)cudaStreamSynchronize(s);
                       add_one<<<1, 256, 0, s>>>(buffer, 256);
                     });
                   }),
                   "cudaStreamEndCapture");

  // stepgraph's own allocation function refuses before reaching the driver, naming the region.
  expect_explained(thrown_message([&] {
                     registry.capture(region, stream,
                                      [&](cudaStream_t) { (void)cuda::device_allocate(4096, "late scratch"); });
                   }),
                   "'late scratch' during capture of " + std::string(region));

  // A whole-step capture that synchronises the device.
  {
    FullIterationRunner runner(registry, 0);
    const std::string msg = thrown_message([&] {
      runner.run_step(stream, [&](cudaStream_t s) {
        add_one<<<1, 256, 0, s>>>(buffer, 256);
        (void)cudaDeviceSynchronize();
      });
    });
    EXPECT_NE(msg.find("CUDA-graph capture of full_iteration failed"), std::string::npos) << msg;
    EXPECT_FALSE(stream_is_capturing(stream));
    (void)cudaGetLastError();
  }

  // The stream and the registry still work: a healthy capture computes.
  SG_CUDA_CHECK(cudaMemsetAsync(buffer, 0, 256 * sizeof(float), stream));
  GraphExec& exec = registry.capture("healthy", stream, [&](cudaStream_t s) { add_one<<<1, 256, 0, s>>>(buffer, 256); });
  for (int i = 0; i < 3; ++i) registry.launch(exec, stream);
  stream.synchronize();
  float first = 0.0f;
  SG_CUDA_CHECK(cudaMemcpy(&first, buffer, sizeof(float), cudaMemcpyDeviceToHost));
  EXPECT_EQ(first, 3.0f);
  registry.destroy_all();
  cuda::device_free(buffer, "test buffer");
}

// The capture check (data parallelism's cross-rank comparison) sees each graph after its capture and before
// its first launch; a refused graph is destroyed unlaunched, and the next step captures again.
TEST_F(GraphRuntime, CaptureCheckRunsBeforeTheFirstLaunchAndARefusedGraphNeverRuns) {
  cuda::Stream stream;
  float* buffer = static_cast<float*>(cuda::device_allocate(256 * sizeof(float), "test buffer"));
  SG_CUDA_CHECK(cudaMemsetAsync(buffer, 0, 256 * sizeof(float), stream));
  GraphRegistry registry;
  std::vector<GraphInfo> checked;
  bool refuse = true;
  registry.set_capture_check([&](const GraphInfo& g) {
    checked.push_back(g);
    if (refuse) throw Error("rank 1 captured another graph");
  });
  FullIterationRunner runner(registry, /*warmup_steps=*/0);
  auto body = [&](cudaStream_t s) {
    add_one<<<1, 256, 0, s>>>(buffer, 256);
    add_one<<<1, 256, 0, s>>>(buffer, 256);
  };
  EXPECT_NE(thrown_message([&] { runner.run_step(stream, body); }).find("rank 1 captured another graph"),
            std::string::npos);
  ASSERT_EQ(checked.size(), 1u);
  EXPECT_EQ(checked[0].kernel_nodes, 2u);
  EXPECT_EQ(checked[0].launches, 0u) << "checked after a launch";
  ASSERT_EQ(registry.graphs().size(), 1u);
  EXPECT_FALSE(registry.find(checked[0].name)->valid()) << "the refused graph is still executable";
  EXPECT_EQ(registry.stats().replays, 0u);
  stream.synchronize();
  float first = -1.0f;
  SG_CUDA_CHECK(cudaMemcpy(&first, buffer, sizeof(float), cudaMemcpyDeviceToHost));
  EXPECT_EQ(first, 0.0f) << "the refused graph ran";

  refuse = false;  // the next step captures again, is checked again, then launches
  EXPECT_EQ(runner.run_step(stream, body), StepMode::capture);
  EXPECT_EQ(runner.run_step(stream, body), StepMode::replay);
  EXPECT_EQ(checked.size(), 2u) << "a replay is not a capture";
  stream.synchronize();
  SG_CUDA_CHECK(cudaMemcpy(&first, buffer, sizeof(float), cudaMemcpyDeviceToHost));
  EXPECT_EQ(first, 4.0f);
  registry.destroy_all();
  cuda::device_free(buffer, "test buffer");
}

// ThreadLocal capture mode: another thread may allocate while this one captures.
TEST_F(GraphRuntime, CaptureIsThreadLocal) {
  cuda::Stream stream;
  float* buffer = static_cast<float*>(cuda::device_allocate(256 * sizeof(float), "test buffer"));
  void* other = nullptr;
  cudaError_t other_err = cudaErrorUnknown;
  GraphRegistry registry;
  GraphExec& exec = registry.capture("threaded", stream, [&](cudaStream_t s) {
    add_one<<<1, 256, 0, s>>>(buffer, 256);
    std::thread([&] { other_err = cudaMalloc(&other, 1 << 20); }).join();
    add_one<<<1, 256, 0, s>>>(buffer, 256);
  });
  EXPECT_EQ(other_err, cudaSuccess);
  EXPECT_EQ(exec.info().kernel_nodes, 2u);
  SG_CUDA_CHECK(cudaFree(other));  // raw like its cudaMalloc: the other thread's allocation is what is tested
  cuda::device_free(buffer, "test buffer");
}

TEST_F(GraphRuntime, MemoryReturnsToBaselineAfterGraphsDestroyed) {
  ToyStep toy(ToyConfig{});
  cuda::Stream stream;
  auto cycle = [&] {
    toy.reset();
    GraphRegistry registry;
    {
      FullIterationRunner full(registry, 1);
      EagerRegionRunner eager;
      for (int s = 0; s < 4; ++s) full.run_step(stream, [&](cudaStream_t st) { toy.enqueue(st, eager); });
    }
    {
      ScopedGraphRunner scoped(plan_graph_scopes(GraphImpl::transformer_engine, {}, toy.layer_regions(), 1), registry,
                               1);
      for (int s = 0; s < 3; ++s) {
        scoped.begin_step();
        toy.enqueue(stream, scoped);
        scoped.end_step(stream);
      }
    }
    stream.synchronize();
    EXPECT_EQ(registry.stats().graphs_live, 1 + 4 * toy.config().layers);
  };  // registry destroyed here

  auto free_bytes = [] {
    SG_CUDA_CHECK(cudaDeviceSynchronize());
    size_t free_b = 0, total_b = 0;
    SG_CUDA_CHECK(cudaMemGetInfo(&free_b, &total_b));
    return free_b;
  };

  // One cycle first: the driver sets up its graph bookkeeping once per context, which is not a leak.
  cycle();
  const size_t baseline = free_bytes();
  const size_t stepgraph_bytes = cuda::device_bytes_allocated();
  for (int i = 0; i < 3; ++i) {
    cycle();
    EXPECT_EQ(free_bytes(), baseline) << "device memory after cycle " << i << " of graph create/destroy";
    EXPECT_EQ(cuda::device_bytes_allocated(), stepgraph_bytes);
  }
}

TEST_F(GraphRuntime, DevicePropertiesAndArenaBreakdown) {
  const cuda::DeviceProperties& p = cuda::device_properties();
  EXPECT_GT(p.sm_count, 0);
  EXPECT_GT(p.total_memory, 0u);
  EXPECT_EQ(&p, &cuda::device_properties());  // read once, cached
  cuda::MemoryPlan plan;
  const cuda::MemorySlot a = plan.add("a", cuda::MemoryCategory::activations, 1000);
  const cuda::MemorySlot w = plan.add("w", cuda::MemoryCategory::parameters, 3000, 1024);
  const size_t before = cuda::device_bytes_allocated();
  {
    cuda::Arena arena(plan);
    EXPECT_EQ(cuda::device_bytes_allocated(), before + arena.total_bytes());
    EXPECT_EQ(reinterpret_cast<uintptr_t>(arena.get<float>(w)) % 1024, 0u);
    EXPECT_EQ(arena.get<char>(a) - static_cast<char*>(arena.base()),
              static_cast<std::ptrdiff_t>(arena.layout().allocations[a.index].offset));
    const std::string text = arena.breakdown();
    EXPECT_NE(text.find("activations"), std::string::npos) << text;
    EXPECT_NE(text.find("device free/total after"), std::string::npos) << text;
    cuda::MemoryPlan other;
    const cuda::MemorySlot foreign = other.add("x", cuda::MemoryCategory::inputs, 4);
    EXPECT_NE(thrown_message([&] { (void)arena.raw(foreign); }).find("was not planned in this arena"),
              std::string::npos);
  }
  EXPECT_EQ(cuda::device_bytes_allocated(), before);
}

}  // namespace
}  // namespace sg::graph
