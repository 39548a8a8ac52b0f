#include "bench/device_activity.h"

#include <algorithm>
#include <utility>

namespace sg::bench {

const char* activity_kind_name(ActivityKind kind) {
  switch (kind) {
    case ActivityKind::kernel: return "kernel";
    case ActivityKind::memset: return "memset";
    case ActivityKind::memcpy: return "memcpy";
  }
  return "?";
}

ActivitySummary& ActivitySummary::operator+=(const ActivitySummary& o) {
  kernels += o.kernels;
  memsets += o.memsets;
  memcpys += o.memcpys;
  invalid += o.invalid;
  kernel_ns += o.kernel_ns;
  memset_ns += o.memset_ns;
  memcpy_ns += o.memcpy_ns;
  busy_ns += o.busy_ns;
  span_ns += o.span_ns;
  return *this;
}

ActivitySummary summarize_activity(const std::vector<ActivityRecord>& records) {
  ActivitySummary s;
  std::vector<std::pair<uint64_t, uint64_t>> intervals;
  intervals.reserve(records.size());
  for (const ActivityRecord& r : records) {
    // CUPTI reports 0/0 when it could not take a timestamp; such a record says nothing about time.
    if (r.start_ns == 0 || r.end_ns < r.start_ns) {
      ++s.invalid;
      continue;
    }
    const uint64_t duration = r.end_ns - r.start_ns;
    switch (r.kind) {
      case ActivityKind::kernel: ++s.kernels; s.kernel_ns += duration; break;
      case ActivityKind::memset: ++s.memsets; s.memset_ns += duration; break;
      case ActivityKind::memcpy: ++s.memcpys; s.memcpy_ns += duration; break;
    }
    intervals.emplace_back(r.start_ns, r.end_ns);
  }
  if (intervals.empty()) return s;
  std::sort(intervals.begin(), intervals.end());
  uint64_t begin = intervals.front().first, end = intervals.front().second;
  for (size_t i = 1; i < intervals.size(); ++i) {
    if (intervals[i].first > end) {
      s.busy_ns += end - begin;
      begin = intervals[i].first;
      end = intervals[i].second;
    } else {
      end = std::max(end, intervals[i].second);
    }
  }
  s.busy_ns += end - begin;
  uint64_t last_end = 0;
  for (const auto& iv : intervals) last_end = std::max(last_end, iv.second);
  s.span_ns = last_end - intervals.front().first;
  return s;
}

}  // namespace sg::bench
