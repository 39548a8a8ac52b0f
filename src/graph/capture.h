#pragma once
// Stream capture: records a region's launches into a cudaGraph_t instead of running them.
//
// Always cudaStreamCaptureModeThreadLocal: only this thread's unsafe calls (allocation, host sync)
// break the capture — a data-loader thread may keep using CUDA. While a capture is open this thread
// also holds a cuda::StepGuard, so stepgraph's own allocation/sync wrappers fail *before* reaching the
// driver, with the region's name.
//
// A capture that breaks becomes an sg::Error that says which region was being captured, the CUDA
// error, and the usual causes (see capture_failure_message).
#include <cuda_runtime.h>

#include <chrono>
#include <string>

#include "cuda/arena.h"
#include "graph/region.h"

namespace sg::graph {

// "CUDA-graph capture of <region> failed: <detail>\n  usual causes: ...". Used by every capture path.
std::string capture_failure_message(const std::string& region, const std::string& detail);

class StreamCapture {
 public:
  // Begins capturing `stream` (must be a created stream, not 0/legacy/per-thread default, and not
  // already capturing). Throws the explained error otherwise.
  StreamCapture(cudaStream_t stream, std::string region);
  // If end() was not called (the body threw): ends the capture, discards the partial graph and
  // clears the non-sticky error it left. Never throws.
  ~StreamCapture();
  StreamCapture(const StreamCapture&) = delete;
  StreamCapture& operator=(const StreamCapture&) = delete;

  // Ends the capture and returns the graph (the caller owns it: cudaGraphDestroy or GraphExec).
  // Throws the explained error when the capture was invalidated.
  cudaGraph_t end();

  // Ends the capture and throws the graph away; returns how cudaStreamEndCapture ended
  // ("cudaErrorStreamCaptureInvalidated: ..."). For error paths; never throws.
  std::string discard() noexcept;

  const std::string& region() const { return region_; }
  double elapsed_ms() const;  // host time from begin to end() (or to now while open)

 private:
  cudaStream_t stream_;
  std::string region_;
  cuda::StepGuard guard_;
  bool open_ = false;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point stop_;
};

struct CapturedGraph {
  cudaGraph_t graph = nullptr;  // owned by the caller
  double capture_ms = 0.0;
};

// Captures `body(stream)` as one graph. Any exception from the body (a failed SG_CUDA_CHECK, the
// StepGuard) is rethrown as the explained capture error; the capture is closed either way.
CapturedGraph capture_graph(cudaStream_t stream, const std::string& region, const RegionBody& body);

// True when `stream` is being captured right now (by this or another thread).
bool stream_is_capturing(cudaStream_t stream);

}  // namespace sg::graph
