#pragma once
// What a test may assert about its own process's memory (Linux): the peak resident set so far, and the anonymous
// resident memory now (heap, not mapped files).
#include <sys/resource.h>

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>

#include "sanitizer_build.h"

namespace sg::test {

// Built with AddressSanitizer or ThreadSanitizer (scripts/sanitize_cpu.sh). Their allocators keep freed memory
// resident for a while (ASan's quarantine), their shadow memory is resident and anonymous too (TSan's: several
// times what the program touches), and they end the process on an allocation they cannot serve instead of
// throwing std::bad_alloc: a test's bound on its resident memory, or its impossible allocation, is checked only
// without them.
inline constexpr bool kSanitizedAllocator = kAddressSanitizer || kThreadSanitizer;

// The peak resident memory of this process so far, in bytes (getrusage reports KiB).
inline int64_t peak_resident_bytes() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<int64_t>(usage.ru_maxrss) * 1024;
}

// This process's anonymous resident memory in bytes; -1 where /proc says nothing.
inline int64_t resident_anonymous_bytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("RssAnon:", 0) != 0) continue;
    std::istringstream fields(line.substr(8));
    int64_t kib = -1;
    fields >> kib;
    return kib * 1024;
  }
  return -1;
}

}  // namespace sg::test
