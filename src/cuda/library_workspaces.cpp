#include "cuda/library_workspaces.h"

#include <cstdint>
#include <map>
#include <mutex>
#include <utility>

namespace sg::cuda {

namespace {

struct Registry {
  std::mutex mutex;
  std::map<long, std::pair<uintptr_t, uintptr_t>> ranges;  // id -> [begin, end)
  long next_id = 0;
};

Registry& registry() {
  static Registry r;  // process-wide: workspaces outlive no process
  return r;
}

}  // namespace

LibraryWorkspace::LibraryWorkspace(const void* ptr, size_t bytes) {
  if (ptr == nullptr || bytes == 0) return;
  Registry& r = registry();
  const std::lock_guard<std::mutex> lock(r.mutex);
  id_ = r.next_id++;
  const auto begin = reinterpret_cast<uintptr_t>(ptr);
  r.ranges.emplace(id_, std::make_pair(begin, begin + bytes));
}

LibraryWorkspace::~LibraryWorkspace() { release(); }

LibraryWorkspace::LibraryWorkspace(LibraryWorkspace&& other) noexcept : id_(std::exchange(other.id_, -1)) {}

LibraryWorkspace& LibraryWorkspace::operator=(LibraryWorkspace&& other) noexcept {
  if (this != &other) {
    release();
    id_ = std::exchange(other.id_, -1);
  }
  return *this;
}

void LibraryWorkspace::release() noexcept {
  if (id_ < 0) return;
  Registry& r = registry();
  const std::lock_guard<std::mutex> lock(r.mutex);
  r.ranges.erase(id_);
  id_ = -1;
}

bool inside_library_workspace(const void* ptr, size_t bytes) {
  if (ptr == nullptr || bytes == 0) return false;
  const auto begin = reinterpret_cast<uintptr_t>(ptr);
  const uintptr_t end = begin + bytes;
  Registry& r = registry();
  const std::lock_guard<std::mutex> lock(r.mutex);
  for (const auto& [id, range] : r.ranges) {
    if (begin >= range.first && end <= range.second) return true;
  }
  return false;
}

}  // namespace sg::cuda
