// ScopedGraphRunner's step bookkeeping on the CPU: regions run eagerly during warmup (the eager path never
// touches the stream, and GraphRegistry only asks how many devices there are), so no GPU is needed.
#include "graph/scoped_runner.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "cuda/arena.h"
#include "test_util.h"

namespace sg::graph {
namespace {

using test::thrown_message;

// One dense layer, its attention graphed; a warmup no test reaches, so every region runs eagerly.
ScopedGraphRunner eager_runner(GraphRegistry& registry) {
  const std::vector<LayerRegions> layers = {{0, {Module::attn, Module::mlp}}};
  return ScopedGraphRunner(plan_graph_scopes(GraphImpl::transformer_engine, {GraphScope::attn}, layers, 1), registry,
                           /*warmup_steps=*/1000);
}

const RegionKey kAttn{0, Module::attn, Phase::forward};
cudaStream_t const kNoStream = nullptr;  // never used on the eager path

// A step whose region throws (as a failed capture does) leaves the runner outside a step: the caller
// gets the region's own error, and stepping again works — not "begin_step called twice without
// end_step". GraphedStep runs its transformer_engine steps through run_step.
TEST(ScopedGraphRunner, AStepThatThrowsLeavesTheRunnerOutsideAStep) {
  GraphRegistry registry;
  ScopedGraphRunner runner = eager_runner(registry);
  ASSERT_TRUE(runner.plan().graphs_region(kAttn));  // a graphed region, run eagerly during warmup

  const std::string msg = thrown_message([&] {
    runner.run_step(kNoStream, [&](cudaStream_t s) {
      runner.run(kAttn, s, [](cudaStream_t) { throw Error("the region's own error"); });
    });
  });
  EXPECT_EQ(msg, "the region's own error");
  EXPECT_FALSE(cuda::step_guard_active());  // the region's guard ended with the exception
  EXPECT_FALSE(runner.step_captured());
  // Outside a step: a region is refused, as before any step.
  EXPECT_NE(thrown_message([&] { runner.run(kAttn, kNoStream, [](cudaStream_t) {}); }).find("outside begin_step"),
            std::string::npos);

  int ran = 0;
  for (int step = 0; step < 2; ++step) {
    EXPECT_NO_THROW(runner.run_step(kNoStream, [&](cudaStream_t s) {
      runner.run(kAttn, s, [&](cudaStream_t) { ++ran; });
      runner.run(RegionKey{0, Module::mlp, Phase::forward}, s, [&](cudaStream_t) { ++ran; });
    }));
  }
  EXPECT_EQ(ran, 4);
  EXPECT_FALSE(runner.graphs_active());
  EXPECT_EQ(registry.stats().graphs_created, 0);
}

// A step body that throws outside any region (the eager skeleton) is aborted the same way.
TEST(ScopedGraphRunner, AStepThatThrowsBetweenRegionsIsAbortedToo) {
  GraphRegistry registry;
  ScopedGraphRunner runner = eager_runner(registry);
  EXPECT_EQ(thrown_message([&] { runner.run_step(kNoStream, [](cudaStream_t) { throw Error("skeleton"); }); }),
            "skeleton");
  EXPECT_NO_THROW(runner.run_step(kNoStream, [&](cudaStream_t s) { runner.run(kAttn, s, [](cudaStream_t) {}); }));
}

// abort_step is the bracket's third end: after it begin_step starts a step; outside a step it does nothing.
TEST(ScopedGraphRunner, AbortStepEndsTheStepWithoutSynchronising) {
  GraphRegistry registry;
  ScopedGraphRunner runner = eager_runner(registry);
  runner.abort_step();  // no step: nothing to do
  runner.begin_step();
  EXPECT_NE(thrown_message([&] { runner.begin_step(); }).find("begin_step called twice"), std::string::npos);
  runner.abort_step();
  EXPECT_NO_THROW(runner.begin_step());
  runner.run(kAttn, kNoStream, [](cudaStream_t) {});
  EXPECT_NO_THROW(runner.end_step(kNoStream));  // no capture this step: end_step does not touch the stream
}

}  // namespace
}  // namespace sg::graph
