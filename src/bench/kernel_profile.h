#pragma once
// Where a repeated piece of GPU work spends its device time, by kernel: CUPTI's records of a window
// (bench/kernel_timer.h, names kept) grouped by kernel name, per repetition (a decoding step of
// `stepgraph generate --profile`). Pure CPU.
#include <cstdint>
#include <string>
#include <vector>

#include "bench/device_activity.h"

namespace sg::bench {

struct KernelProfileRow {
  std::string name;         // the demangled kernel name without its argument list; "memset", "memcpy" for those
  uint64_t launches = 0;    // records in the window
  uint64_t total_ns = 0;    // their summed durations
  uint64_t longest_ns = 0;  // the longest one
};

struct KernelProfile {
  std::vector<KernelProfileRow> rows;  // by total_ns, largest first (ties by name)
  ActivitySummary summary;             // the window's busy time, span and counts
};

// Records with no timestamp (ActivitySummary::invalid) are left out of the rows.
KernelProfile profile_kernels(const std::vector<ActivityRecord>& records);

// A plain-text table per repetition: launches and microseconds per repetition, the share of the kernel time,
// the longest launch; the `top` largest rows and one "(N others)" row. The heading line gives the device's busy
// time per repetition beside `measured_ms_per_repetition` (host clock), so idle time shows as their gap.
std::string format_kernel_profile(const KernelProfile& profile, int64_t repetitions, const std::string& repetition_name,
                                  double measured_ms_per_repetition, size_t top = 20);

}  // namespace sg::bench
