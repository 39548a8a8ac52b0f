#pragma once
// Timing a CUDA graph of repeated launches, as the decoder replays its step: what the decoding benches
// (decode_attention_bench, decode_linear_bench) share with their --iters, --warmup and --calls flags
// (bench_args.h's graph_replay_flags).
#include <functional>
#include <vector>

#include "bench_args.h"
#include "bench_device.h"
#include "cuda/stream.h"
#include "graph/capture.h"
#include "graph/graph_exec.h"

namespace sg::bench {

struct GraphReplayCounts {
  int iters, warmup, calls;
};
inline GraphReplayCounts graph_replay_counts(const ToolArgs& args) {
  return {static_cast<int>(args.integer("--iters")), static_cast<int>(args.integer("--warmup")),
          static_cast<int>(args.integer("--calls"))};
}

// One captured graph of `calls` launches of `enqueue(stream, call)`; each time_once() replays it between two
// events, and median_us() is the median replay divided by `calls`.
class GraphReplayTimer {
 public:
  GraphReplayTimer(cuda::Stream& stream, int calls, const std::function<void(cudaStream_t, int)>& enqueue,
                   const char* name)
      : stream_(stream), calls_(calls), exec_(name) {
    enqueue(stream, 0);  // loads the kernels and plans before the capture
    stream.synchronize();
    graph::StreamCapture capture(stream, name);
    for (int i = 0; i < calls; ++i) enqueue(stream, i);
    exec_.install(capture.end(), stream, 0.0);
  }
  ~GraphReplayTimer() { exec_.destroy(); }
  GraphReplayTimer(const GraphReplayTimer&) = delete;
  GraphReplayTimer& operator=(const GraphReplayTimer&) = delete;
  void warm(int n) {
    for (int i = 0; i < n; ++i) exec_.launch(stream_);
    stream_.synchronize();
  }
  void time_once(cuda::Event& start, cuda::Event& stop) {
    start.record(stream_);
    exec_.launch(stream_);
    stop.record(stream_);
    us_per_call_.push_back(cuda::Event::elapsed_ms(start, stop) * 1000.0 / calls_);
  }
  double median_us() const { return median(us_per_call_); }

 private:
  cuda::Stream& stream_;
  int calls_;
  graph::GraphExec exec_;
  std::vector<double> us_per_call_;
};

}  // namespace sg::bench
