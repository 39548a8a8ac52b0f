#pragma once
// The GPU kernel-time floor from CUPTI's activity API: every kernel (CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL,
// which does not serialise kernels), memset and memcpy the device runs inside a window, with its GPU
// start and end timestamps. Kernels replayed from CUDA graphs produce records too (one per kernel node
// per launch), so eager and graph modes are measured the same way.
//
// Use:
//   KernelTimer timer;            // before any CUDA graph is captured (CUPTI is attached from here on)
//   timer.begin(keep_names);      // outside the timed steps: tracing costs host time per launch
//   ... enqueue one step ...
//   auto records = timer.end();   // synchronises the device, disables tracing, flushes every buffer
//
// CUPTI's callbacks are process-wide: one KernelTimer at a time. Records that arrive outside a window
// are dropped. Buffers: CUPTI asks for them (buffer_requested) and hands them back full or flushed
// (buffer_completed, possibly on CUPTI's own thread — hence the mutex); end() forces the flush, so when
// it returns every record of the window has been delivered.
#include <cstdint>
#include <string>
#include <vector>

#include "bench/device_activity.h"

namespace sg::bench {

class KernelTimer {
 public:
  // Registers the buffer callbacks. Throws sg::Error naming the CUPTI error (and that --floor-steps 0
  // runs the bench without CUPTI) when CUPTI is unusable, or when another KernelTimer is alive.
  KernelTimer();
  ~KernelTimer();  // disables tracing; never throws
  KernelTimer(const KernelTimer&) = delete;
  KernelTimer& operator=(const KernelTimer&) = delete;

  // Starts a window: flushes and drops stale records, then enables kernel, memset and memcpy records.
  // keep_names copies each kernel's name into its record (for --trace; costs host time).
  void begin(bool keep_names);
  // Ends the window (see the file comment) and returns its records in delivery order.
  std::vector<ActivityRecord> end();

  // Records CUPTI dropped (buffers full) since construction; a floor with dropped records is not a floor.
  uint64_t dropped_records() const;
  // "CUPTI API 130100" (cuptiGetVersion).
  static std::string version();

 private:
  bool in_window_ = false;
};

}  // namespace sg::bench
