#pragma once
// Device activity records (what CUPTI reports: kernels, memsets, copies, each with GPU start/end
// timestamps) and their summary, the kernel-time floor: the time the GPU was busy. Pure CPU, so the
// arithmetic is unit-tested; bench/kernel_timer.h fills the records.
#include <cstdint>
#include <string>
#include <vector>

namespace sg::bench {

enum class ActivityKind : uint8_t { kernel, memset, memcpy };
const char* activity_kind_name(ActivityKind kind);  // "kernel", "memset", "memcpy"

struct ActivityRecord {
  ActivityKind kind = ActivityKind::kernel;
  std::string name;       // kernel name as CUPTI gives it (mangled); "" unless names were kept
  uint64_t start_ns = 0;  // GPU timestamps, ns
  uint64_t end_ns = 0;
  uint32_t stream = 0;    // CUPTI stream id
  uint32_t graph_id = 0;  // 0: not launched from a CUDA graph
  uint64_t bytes = 0;     // memset/memcpy size
};

struct ActivitySummary {
  uint64_t kernels = 0, memsets = 0, memcpys = 0;
  uint64_t invalid = 0;    // records with end < start or a zero timestamp (not counted anywhere else)
  uint64_t kernel_ns = 0;  // sum of kernel durations
  uint64_t memset_ns = 0;
  uint64_t memcpy_ns = 0;
  // The union of all [start, end) intervals: the time at least one operation ran. Equal to the sum of
  // durations when nothing overlaps (one stream), smaller when operations ran concurrently. This is the
  // floor: no schedule of the same work on this GPU can take less device time.
  uint64_t busy_ns = 0;
  uint64_t span_ns = 0;  // last end - first start (busy plus idle gaps)

  uint64_t records() const { return kernels + memsets + memcpys; }
  uint64_t duration_sum_ns() const { return kernel_ns + memset_ns + memcpy_ns; }
  // Sums every field (windows are disjoint in time, so busy and span add up).
  ActivitySummary& operator+=(const ActivitySummary& other);
};

ActivitySummary summarize_activity(const std::vector<ActivityRecord>& records);

}  // namespace sg::bench
