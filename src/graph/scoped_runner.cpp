#include "graph/scoped_runner.h"

#include "core/error.h"
#include "core/strings.h"
#include "cuda/arena.h"
#include "cuda/check.h"
#include "cuda/nvtx.h"

namespace sg::graph {

ScopedGraphRunner::ScopedGraphRunner(ScopePlan plan, GraphRegistry& registry, int warmup_steps)
    : plan_(std::move(plan)), registry_(registry), warmup_steps_(warmup_steps) {
  SG_CHECK(warmup_steps >= 0,
           strprintf("model.cuda_graph_warmup_steps must be >= 0, got %d", warmup_steps));
  SG_CHECK(!plan_.full_iteration,
           "ScopedGraphRunner got a full-iteration scope plan: use FullIterationRunner for cuda_graph_impl local");
  registry_.set_graphable_regions(static_cast<int>(plan_.graphed_regions.size()));
}

ScopedGraphRunner::Entry& ScopedGraphRunner::entry(const RegionKey& key) {
  auto it = entries_.find(key);
  if (it == entries_.end()) {
    it = entries_.emplace(key, Entry{}).first;
    it->second.name = region_name(key);
    it->second.graphed = plan_.graphs_region(key.plain());
  }
  return it->second;
}

void ScopedGraphRunner::begin_step() {
  SG_CHECK(!in_step_, "ScopedGraphRunner::begin_step called twice without end_step");
  in_step_ = true;
  ++steps_begun_;
  captured_this_step_ = false;
  step_start_ = std::chrono::steady_clock::now();
}

void ScopedGraphRunner::end_step(cudaStream_t stream) {
  SG_CHECK(in_step_, "ScopedGraphRunner::end_step without begin_step");
  in_step_ = false;
  if (captured_this_step_) {
    // Once per run: wait for the capture step to finish so its time is reported on its own.
    SG_CUDA_CHECK(cudaStreamSynchronize(stream));
    registry_.set_capture_step_ms(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - step_start_).count());
  }
}

void ScopedGraphRunner::abort_step() noexcept {
  in_step_ = false;
  captured_this_step_ = false;  // a failed step reports no capture time
}

void ScopedGraphRunner::run_step(cudaStream_t stream, const RegionBody& step) {
  begin_step();
  try {
    step(stream);
  } catch (...) {
    abort_step();
    throw;
  }
  end_step(stream);
}

void ScopedGraphRunner::recapture() {
  for (auto& [key, e] : entries_) e.stale = true;
}

void ScopedGraphRunner::run(const RegionKey& key, cudaStream_t stream, const RegionBody& body) {
  SG_CHECK(in_step_, strprintf("region %s ran outside begin_step/end_step", region_name(key).c_str()));
  Entry& e = entry(key);
  cuda::NvtxRange range(e.name);
  if (!e.graphed || !graphs_active()) {
    cuda::StepGuard guard(e.name);
    body(stream);
    return;
  }
  if (e.stale || e.exec == nullptr || !e.exec->valid()) {
    e.exec = &registry_.capture(e.name, stream, body);  // StreamCapture holds the StepGuard
    e.stale = false;
    captured_this_step_ = true;
  }
  registry_.launch(*e.exec, stream);
}

}  // namespace sg::graph
