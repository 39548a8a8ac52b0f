#include "graph/capture.h"

#include "core/error.h"
#include "core/log.h"
#include "core/strings.h"
#include "cuda/check.h"

namespace sg::graph {

namespace {

double ms_between(std::chrono::steady_clock::time_point a, std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

std::string cuda_error_text(cudaError_t err) {
  return strprintf("%s: %s", cudaGetErrorName(err), cudaGetErrorString(err));
}

}  // namespace

std::string capture_failure_message(const std::string& region, const std::string& detail) {
  return strprintf(
      "CUDA-graph capture of %s failed: %s\n"
      "  usual causes, inside the region's launches:\n"
      "    - a host synchronisation: cudaStreamSynchronize / cudaDeviceSynchronize / cudaEventSynchronize,\n"
      "      a blocking cudaMemcpy (use cudaMemcpyAsync on the step's stream), or a device value read on\n"
      "      the host (keep it in device memory and read it through a pointer);\n"
      "    - an allocation: cudaMalloc / cudaFree / cudaMallocHost (plan the buffer in the MemoryPlan);\n"
      "    - work on the legacy default stream (stream 0) or on a stream not joined to the capture;\n"
      "    - a library that plans or allocates lazily (cuBLASLt heuristics, cuDNN graph build: plan once,\n"
      "      before the first step).\n"
      "  to find the call, run with model.cuda_graph_impl none: the step guard names allocations and\n"
      "  synchronisations made through stepgraph in eager steps too.",
      region.c_str(), detail.c_str());
}

bool stream_is_capturing(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  SG_CUDA_CHECK(cudaStreamIsCapturing(stream, &status));
  return status != cudaStreamCaptureStatusNone;
}

StreamCapture::StreamCapture(cudaStream_t stream, std::string region)
    : stream_(stream), region_(std::move(region)), guard_("capture of " + region_) {
  if (stream == nullptr || stream == cudaStreamLegacy || stream == cudaStreamPerThread) {
    throw Error(capture_failure_message(
        region_, "the stream is the default stream; capture needs a stream created with cuda::Stream"));
  }
  if (stream_is_capturing(stream)) {
    throw Error(capture_failure_message(
        region_,
        "the stream is already being captured (a region graph inside a full-iteration capture? use the "
        "EagerRegionRunner inside a whole-step capture)"));
  }
  start_ = std::chrono::steady_clock::now();
  const cudaError_t err = cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal);
  if (err != cudaSuccess) {
    (void)cudaGetLastError();
    throw Error(capture_failure_message(region_, "cudaStreamBeginCapture: " + cuda_error_text(err)));
  }
  open_ = true;
}

StreamCapture::~StreamCapture() { (void)discard(); }

std::string StreamCapture::discard() noexcept {
  if (!open_) return "no open capture";
  open_ = false;
  cudaGraph_t partial = nullptr;
  // Ending an invalidated capture returns an error and (maybe) no graph: both are expected here.
  const cudaError_t err = cudaStreamEndCapture(stream_, &partial);
  if (partial != nullptr) (void)cudaGraphDestroy(partial);
  (void)cudaGetLastError();  // capture errors are not sticky; leave the context clean for the next call
  stop_ = std::chrono::steady_clock::now();
  return err == cudaSuccess ? std::string("cudaSuccess") : cuda_error_text(err);
}

cudaGraph_t StreamCapture::end() {
  SG_CHECK(open_, strprintf("StreamCapture::end called twice for %s", region_.c_str()));
  open_ = false;
  cudaGraph_t graph = nullptr;
  const cudaError_t err = cudaStreamEndCapture(stream_, &graph);
  stop_ = std::chrono::steady_clock::now();
  if (err != cudaSuccess || graph == nullptr) {
    if (graph != nullptr) (void)cudaGraphDestroy(graph);
    (void)cudaGetLastError();
    throw Error(capture_failure_message(
        region_, "cudaStreamEndCapture: " + cuda_error_text(err == cudaSuccess ? cudaErrorUnknown : err) +
                     (err == cudaErrorStreamCaptureInvalidated
                          ? " (an operation inside the region invalidated the capture)"
                          : "")));
  }
  return graph;
}

double StreamCapture::elapsed_ms() const {
  return ms_between(start_, open_ ? std::chrono::steady_clock::now() : stop_);
}

CapturedGraph capture_graph(cudaStream_t stream, const std::string& region, const RegionBody& body) {
  StreamCapture capture(stream, region);
  try {
    body(stream);
  } catch (const std::exception& e) {
    // Close the capture first: its error (usually "invalidated") is the consequence, the body's
    // exception is the cause.
    const std::string end_status = capture.discard();
    throw Error(capture_failure_message(region, std::string(e.what()) + "\n  (the capture then ended with " +
                                                    end_status + ")"));
  }
  CapturedGraph out;
  out.graph = capture.end();
  out.capture_ms = capture.elapsed_ms();
  return out;
}

}  // namespace sg::graph
