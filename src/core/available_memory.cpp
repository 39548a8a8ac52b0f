#include "core/available_memory.h"

#include <sys/resource.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <utility>

#include "core/strings.h"

namespace sg {

std::string bytes_text(double bytes) {
  if (!(bytes < 1.8e19)) return strprintf("%.3g EiB", bytes / 1152921504606846976.0);
  return human_bytes(static_cast<uint64_t>(bytes));
}

namespace {

// "key: value" of /proc/meminfo in bytes, or -1.
double meminfo_bytes(const std::string& key) {
  std::ifstream in("/proc/meminfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key + ":", 0) != 0) continue;
    std::istringstream fields(line.substr(key.size() + 1));
    double kib = -1;
    fields >> kib;
    return kib >= 0 ? kib * 1024.0 : -1.0;
  }
  return -1.0;
}

// A number from a one-line file ("max" or a missing file: -1).
double file_number(const std::string& path) {
  std::ifstream in(path);
  std::string text;
  if (!(in >> text) || text == "max") return -1.0;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  return end != text.c_str() ? v : -1.0;
}

// /proc/self/status "VmSize" (bytes the process maps), or 0.
double mapped_bytes() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmSize:", 0) == 0) return std::strtod(line.c_str() + 7, nullptr) * 1024.0;
  }
  return 0.0;
}

void consider(std::vector<AvailableHostMemory>& limits, double bytes, const std::string& source, bool per_process) {
  if (bytes < 0) return;
  limits.push_back({std::max(bytes, 0.0), source, per_process});
}

}  // namespace

std::vector<AvailableHostMemory> host_memory_limits() {
  std::vector<AvailableHostMemory> limits;
  consider(limits, meminfo_bytes("MemAvailable"), "MemAvailable in /proc/meminfo", false);
  const double v2_max = file_number("/sys/fs/cgroup/memory.max");
  if (v2_max >= 0) {
    consider(limits, v2_max - std::max(file_number("/sys/fs/cgroup/memory.current"), 0.0),
             strprintf("the cgroup limit (memory.max %s minus current usage)", bytes_text(v2_max).c_str()), false);
  }
  const double v1_max = file_number("/sys/fs/cgroup/memory/memory.limit_in_bytes");
  if (v1_max >= 0 && v1_max < 1e18) {
    consider(limits, v1_max - std::max(file_number("/sys/fs/cgroup/memory/memory.usage_in_bytes"), 0.0),
             strprintf("the cgroup limit (memory.limit_in_bytes %s minus current usage)", bytes_text(v1_max).c_str()),
             false);
  }
  for (const auto& [resource, name] :
       {std::pair{RLIMIT_AS, "RLIMIT_AS (ulimit -v)"}, std::pair{RLIMIT_DATA, "RLIMIT_DATA (ulimit -d)"}}) {
    rlimit limit{};
    if (::getrlimit(resource, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
      consider(limits, static_cast<double>(limit.rlim_cur) - mapped_bytes(),
               strprintf("%s of %s minus what the process maps", name,
                         bytes_text(static_cast<double>(limit.rlim_cur)).c_str()),
               true);
    }
  }
  return limits;
}

AvailableHostMemory available_host_memory() {
  AvailableHostMemory best;
  for (const AvailableHostMemory& limit : host_memory_limits()) {
    if (best.source.empty() || limit.bytes < best.bytes) best = limit;
  }
  return best;
}

}  // namespace sg
