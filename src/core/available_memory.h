#pragma once
// How much host memory this process can still take: the least of MemAvailable, the cgroup's memory limit
// minus its usage (v2 or v1), and the address-space / data-segment rlimits minus what the process already
// maps. Whoever is about to allocate a size a user chose (the CPU backend's model, a decoder's KV cache)
// compares it with this first, so a size that does not fit is an error naming both numbers instead of a
// bare std::bad_alloc or the kernel's OOM killer.
#include <string>
#include <vector>

namespace sg {

struct AvailableHostMemory {
  double bytes = 0.0;
  std::string source;  // which limit decided it: "MemAvailable in /proc/meminfo", "cgroup memory.max", ...
  // An rlimit of this process: the other processes on the node (data-parallel ranks) have their own. Otherwise
  // (MemAvailable, the cgroup's limit) the node's processes share it.
  bool per_process = false;
};

AvailableHostMemory available_host_memory();
// Every limit that applies, each on its own (the least of them is available_host_memory()): for processes that
// allocate side by side, which must compare a shared limit with all of their needs and an rlimit with their own.
std::vector<AvailableHostMemory> host_memory_limits();

// human_bytes for a double, so that absurd sizes print ("3.5 EiB") instead of overflowing.
std::string bytes_text(double bytes);

}  // namespace sg
