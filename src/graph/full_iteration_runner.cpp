#include "graph/full_iteration_runner.h"

#include <chrono>

#include "core/error.h"
#include "core/strings.h"
#include "cuda/arena.h"
#include "cuda/check.h"
#include "cuda/nvtx.h"

namespace sg::graph {

const char* step_mode_name(StepMode mode) {
  switch (mode) {
    case StepMode::eager: return "eager";
    case StepMode::capture: return "capture";
    case StepMode::replay: return "replay";
  }
  return "?";
}

FullIterationRunner::FullIterationRunner(GraphRegistry& registry, int warmup_steps, bool enabled,
                                         std::string graph_name)
    : registry_(registry), warmup_steps_(warmup_steps), enabled_(enabled), graph_name_(std::move(graph_name)) {
  SG_CHECK(warmup_steps >= 0, strprintf("model.cuda_graph_warmup_steps must be >= 0, got %d", warmup_steps));
  if (enabled_) registry_.set_graphable_regions(1);
}

StepMode FullIterationRunner::next_mode() const {
  if (!enabled_ || steps_run_ < warmup_steps_) return StepMode::eager;
  if (stale_ || exec_ == nullptr || !exec_->valid()) return StepMode::capture;
  return StepMode::replay;
}

StepMode FullIterationRunner::run_step(cudaStream_t stream, const RegionBody& step) {
  const StepMode mode = next_mode();
  const auto t0 = std::chrono::steady_clock::now();
  {
    // 1-based, like the trainer's iterations and GraphedStep's scoped steps.
    const std::string step_name = strprintf("step %lld", static_cast<long long>(steps_run_ + 1));
    cuda::NvtxRange range(strprintf("%s [%s]", step_name.c_str(), step_mode_name(mode)));
    cuda::StepGuard guard(step_name);
    switch (mode) {
      case StepMode::eager:
        step(stream);
        break;
      case StepMode::capture:
        exec_ = &registry_.capture(graph_name_, stream, step);
        stale_ = false;
        registry_.launch(*exec_, stream);
        break;
      case StepMode::replay:
        registry_.launch(*exec_, stream);
        break;
    }
  }
  ++steps_run_;
  if (mode == StepMode::capture) {
    SG_CUDA_CHECK(cudaStreamSynchronize(stream));  // once per run: time the capture step on its own
    capture_step_ms_ =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    registry_.set_capture_step_ms(capture_step_ms_);
  }
  return mode;
}

}  // namespace sg::graph
