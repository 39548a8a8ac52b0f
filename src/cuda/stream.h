#pragma once
// RAII CUDA streams and events. Streams are created non-blocking, so the legacy default stream never
// implicitly synchronises with them (a legacy-stream call would otherwise break a capture).
// Host-synchronising members go through check_host_sync_allowed(): under a StepGuard they throw with
// the region's name instead of silently stalling (or invalidating a capture).
#include <cuda_runtime.h>

#include "cuda/arena.h"
#include "cuda/check.h"

namespace sg::cuda {

class Stream {
 public:
  // cudaStreamNonBlocking; priority 0 is the default (lower numbers are higher priority).
  Stream() : Stream(0) {}
  explicit Stream(int priority) {
    SG_CUDA_CHECK(cudaStreamCreateWithPriority(&stream_, cudaStreamNonBlocking, priority));
  }
  ~Stream() { reset(); }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  Stream(Stream&& other) noexcept : stream_(other.stream_) { other.stream_ = nullptr; }
  Stream& operator=(Stream&& other) noexcept {
    if (this != &other) {
      reset();
      stream_ = other.stream_;
      other.stream_ = nullptr;
    }
    return *this;
  }

  cudaStream_t get() const { return stream_; }
  operator cudaStream_t() const { return stream_; }  // NOLINT: used where a cudaStream_t is expected

  // Blocks the host until the stream's work is done (throws under a StepGuard).
  void synchronize() const {
    check_host_sync_allowed("Stream::synchronize");
    SG_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }
  // Makes this stream wait (on the device) for `event`; capturable.
  void wait(cudaEvent_t event) const { SG_CUDA_CHECK(cudaStreamWaitEvent(stream_, event, 0)); }

 private:
  void reset() noexcept {
    // cudaStreamDestroy does not block; pending work completes, then resources are released.
    if (stream_ != nullptr) SG_CUDA_CHECK_NOEXCEPT(cudaStreamDestroy(stream_));
    stream_ = nullptr;
  }
  cudaStream_t stream_ = nullptr;
};

class Event {
 public:
  // Timing events (for elapsed_ms) only when asked: plain events are cheaper to record and wait on.
  explicit Event(bool timing = false) {
    SG_CUDA_CHECK(cudaEventCreateWithFlags(&event_, timing ? cudaEventDefault : cudaEventDisableTiming));
  }
  ~Event() { reset(); }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  Event(Event&& other) noexcept : event_(other.event_) { other.event_ = nullptr; }
  Event& operator=(Event&& other) noexcept {
    if (this != &other) {
      reset();
      event_ = other.event_;
      other.event_ = nullptr;
    }
    return *this;
  }

  cudaEvent_t get() const { return event_; }
  operator cudaEvent_t() const { return event_; }  // NOLINT

  void record(cudaStream_t stream) const { SG_CUDA_CHECK(cudaEventRecord(event_, stream)); }
  // Host wait (throws under a StepGuard).
  void synchronize() const {
    check_host_sync_allowed("Event::synchronize");
    SG_CUDA_CHECK(cudaEventSynchronize(event_));
  }
  // True when the recorded work is done; never blocks.
  bool query() const {
    const cudaError_t err = cudaEventQuery(event_);
    if (err == cudaErrorNotReady) return false;
    SG_CUDA_CHECK(err);
    return true;
  }
  // Milliseconds between two recorded timing events; waits for `end`.
  static float elapsed_ms(const Event& start, const Event& end) {
    end.synchronize();
    float ms = 0.0f;
    SG_CUDA_CHECK(cudaEventElapsedTime(&ms, start.event_, end.event_));
    return ms;
  }

 private:
  void reset() noexcept {
    if (event_ != nullptr) SG_CUDA_CHECK_NOEXCEPT(cudaEventDestroy(event_));
    event_ = nullptr;
  }
  cudaEvent_t event_ = nullptr;
};

}  // namespace sg::cuda
