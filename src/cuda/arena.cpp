#include "cuda/arena.h"

#include <cuda_runtime.h>

#include <atomic>
#include <cstdio>
#include <mutex>
#include <unordered_map>
#include <utility>

#include "core/log.h"
#include "core/strings.h"
#include "cuda/check.h"

namespace sg::cuda {

namespace {

std::atomic<uint32_t> g_next_plan_id{1};
std::atomic<size_t> g_device_bytes{0};

// The chain of active StepGuards on this thread, outermost first.
thread_local std::vector<std::string> t_guards;

// device_allocate'd pointer -> bytes. Heap objects that are never destroyed, so an arena freed during
// static destruction or from an atexit handler still finds them.
std::mutex& sizes_mutex() {
  static auto* m = new std::mutex;
  return *m;
}
std::unordered_map<void*, size_t>& sizes() {
  static auto* m = new std::unordered_map<void*, size_t>;
  return *m;
}

void remember_allocation(void* ptr, size_t bytes) {
  std::lock_guard<std::mutex> lock(sizes_mutex());
  sizes()[ptr] = bytes;
  g_device_bytes += bytes;
}

void forget_allocation(void* ptr) {
  std::lock_guard<std::mutex> lock(sizes_mutex());
  const auto it = sizes().find(ptr);
  if (it == sizes().end()) return;
  g_device_bytes -= it->second;
  sizes().erase(it);
}

// device_free_noexcept / pinned_host_free_noexcept under a StepGuard: the owner was destroyed inside a step.
void log_freed_during_step(const char* kind, const char* what) noexcept {
  try {
    log::error(strprintf("freeing %s '%s' during %s: nothing may be allocated or freed inside a step or a "
                         "CUDA-graph capture; freed anyway, from a destructor",
                         kind, what, step_guard_region().c_str()));
  } catch (...) {
    std::fprintf(stderr, "error: freeing %s '%s' inside a step or a CUDA-graph capture\n", kind, what);
  }
}

size_t align_up(size_t value, size_t alignment) { return (value + alignment - 1) / alignment * alignment; }

bool is_power_of_two(size_t v) { return v != 0 && (v & (v - 1)) == 0; }

}  // namespace

const char* memory_category_name(MemoryCategory category) {
  switch (category) {
    case MemoryCategory::parameters: return "parameters";
    case MemoryCategory::main_weights: return "main_weights";
    case MemoryCategory::gradients: return "gradients";
    case MemoryCategory::optimizer_state: return "optimizer_state";
    case MemoryCategory::activations: return "activations";
    case MemoryCategory::workspaces: return "workspaces";
    case MemoryCategory::inputs: return "inputs";
  }
  return "?";
}

// ---------------------------------------------------------------------------------------------
// MemoryPlan
// ---------------------------------------------------------------------------------------------

MemoryPlan::MemoryPlan() : id_(g_next_plan_id.fetch_add(1)) {}

MemorySlot MemoryPlan::add(std::string name, MemoryCategory category, size_t bytes, size_t alignment) {
  SG_CHECK(!name.empty(), "MemoryPlan::add: an allocation needs a name");
  SG_CHECK(static_cast<int>(category) < kNumMemoryCategories,
           strprintf("MemoryPlan::add(%s): invalid category %d", name.c_str(), static_cast<int>(category)));
  SG_CHECK(is_power_of_two(alignment) && alignment <= 4096,
           strprintf("MemoryPlan::add(%s): alignment %zu must be a power of two <= 4096", name.c_str(),
                     alignment));
  SG_CHECK(find(name).index == UINT32_MAX,
           strprintf("MemoryPlan::add: '%s' is planned twice; give each buffer a unique name", name.c_str()));
  SG_CHECK(allocations_.size() < UINT32_MAX - 1, "MemoryPlan::add: too many allocations");
  PlannedAllocation a;
  a.name = std::move(name);
  a.category = category;
  a.bytes = bytes;
  a.alignment = alignment;
  const auto index = static_cast<uint32_t>(allocations_.size());
  index_by_name_.emplace(a.name, index);
  allocations_.push_back(std::move(a));
  return MemorySlot{index, id_};
}

const PlannedAllocation& MemoryPlan::at(MemorySlot slot) const {
  SG_CHECK(slot.plan_id == id_ && slot.index < allocations_.size(),
           strprintf("MemoryPlan::at: slot %u of plan %u does not belong to plan %u (%zu allocations)",
                     slot.index, slot.plan_id, id_, allocations_.size()));
  return allocations_[slot.index];
}

MemorySlot MemoryPlan::find(const std::string& name) const {
  const auto it = index_by_name_.find(name);
  return it == index_by_name_.end() ? MemorySlot{} : MemorySlot{it->second, id_};
}

size_t MemoryPlan::category_bytes(MemoryCategory category) const {
  size_t sum = 0;
  for (const auto& a : allocations_) {
    if (a.category == category) sum += a.bytes;
  }
  return sum;
}

size_t MemoryPlan::requested_bytes() const {
  size_t sum = 0;
  for (const auto& a : allocations_) sum += a.bytes;
  return sum;
}

MemoryLayout MemoryPlan::layout() const {
  MemoryLayout out;
  out.allocations = allocations_;
  size_t cursor = 0;
  for (int c = 0; c < kNumMemoryCategories; ++c) {
    cursor = align_up(cursor, kArenaAlignment);
    out.categories[c].begin = cursor;
    for (auto& a : out.allocations) {
      if (static_cast<int>(a.category) != c) continue;
      cursor = align_up(cursor, a.alignment);
      a.offset = cursor;
      cursor += a.bytes;
      out.requested_bytes[c] += a.bytes;
    }
    out.categories[c].end = cursor;
  }
  out.total_bytes = align_up(cursor, kArenaAlignment);
  return out;
}

// ---------------------------------------------------------------------------------------------
// Arena
// ---------------------------------------------------------------------------------------------

Arena::Arena(const MemoryPlan& plan) : plan_id_(plan.id()), layout_(plan.layout()) {
  SG_CUDA_CHECK(cudaMemGetInfo(&free_before_, &total_before_));
  if (layout_.total_bytes > 0) {
    base_ = static_cast<unsigned char*>(device_allocate(layout_.total_bytes, "memory arena"));
  }
  SG_CUDA_CHECK(cudaMemGetInfo(&free_after_, &total_after_));
}

Arena::~Arena() { release(); }

Arena::Arena(Arena&& other) noexcept
    : plan_id_(other.plan_id_),
      layout_(std::move(other.layout_)),
      base_(std::exchange(other.base_, nullptr)),
      free_before_(other.free_before_),
      total_before_(other.total_before_),
      free_after_(other.free_after_),
      total_after_(other.total_after_) {}

Arena& Arena::operator=(Arena&& other) noexcept {
  if (this != &other) {
    release();
    plan_id_ = other.plan_id_;
    layout_ = std::move(other.layout_);
    base_ = std::exchange(other.base_, nullptr);
    free_before_ = other.free_before_;
    total_before_ = other.total_before_;
    free_after_ = other.free_after_;
    total_after_ = other.total_after_;
  }
  return *this;
}

void Arena::release() noexcept {
  device_free_noexcept(base_, "memory arena");
  base_ = nullptr;
}

void* Arena::raw(MemorySlot slot) const {
  SG_CHECK(slot.plan_id == plan_id_ && slot.index < layout_.allocations.size(),
           strprintf("Arena: slot %u of plan %u was not planned in this arena (plan %u); build the "
                     "arena from the plan that issued the slot",
                     slot.index, slot.plan_id, plan_id_));
  return base_ + layout_.allocations[slot.index].offset;
}

size_t Arena::bytes(MemorySlot slot) const {
  (void)raw(slot);  // validates the slot
  return layout_.allocations[slot.index].bytes;
}

void Arena::zero() {
  if (base_ == nullptr) return;
  check_host_sync_allowed("Arena::zero");
  SG_CUDA_CHECK(cudaMemset(base_, 0, layout_.total_bytes));
  SG_CUDA_CHECK(cudaDeviceSynchronize());
}

std::string Arena::breakdown() const {
  return format_memory_breakdown(layout_, free_before_, total_before_, free_after_, total_after_);
}

std::string format_memory_breakdown(const MemoryLayout& layout, size_t free_before, size_t total_before,
                                    size_t free_after, size_t total_after) {
  std::string out = strprintf("%-16s %14s %12s %8s\n", "category", "bytes", "size", "buffers");
  size_t requested = 0;
  for (int c = 0; c < kNumMemoryCategories; ++c) {
    size_t count = 0;
    for (const auto& a : layout.allocations) count += static_cast<int>(a.category) == c ? 1 : 0;
    out += strprintf("%-16s %14zu %12s %8zu\n", memory_category_name(static_cast<MemoryCategory>(c)),
                     layout.requested_bytes[c], human_bytes(layout.requested_bytes[c]).c_str(), count);
    requested += layout.requested_bytes[c];
  }
  out += strprintf("%-16s %14zu %12s %8zu\n", "total", layout.total_bytes,
                   human_bytes(layout.total_bytes).c_str(), layout.allocations.size());
  out += strprintf("%-16s %14zu %12s\n", "  (padding)", layout.total_bytes - requested,
                   human_bytes(layout.total_bytes - requested).c_str());
  out += strprintf("device free/total before: %s / %s\n", human_bytes(free_before).c_str(),
                   human_bytes(total_before).c_str());
  out += strprintf("device free/total after:  %s / %s\n", human_bytes(free_after).c_str(),
                   human_bytes(total_after).c_str());
  return out;
}

// ---------------------------------------------------------------------------------------------
// Guard and the allocation functions
// ---------------------------------------------------------------------------------------------

StepGuard::StepGuard(std::string region) { t_guards.push_back(std::move(region)); }
StepGuard::~StepGuard() {
  if (!t_guards.empty()) t_guards.pop_back();
}

bool step_guard_active() { return !t_guards.empty(); }

std::string step_guard_region() { return join(t_guards, " > "); }

void check_allocation_allowed(const char* what, size_t bytes) {
  if (t_guards.empty()) return;
  throw Error(strprintf(
      "memory allocation of %zu bytes for '%s' during %s: nothing may be allocated or freed inside a "
      "step or a CUDA-graph capture (it would break the capture and change addresses between eager "
      "and replayed steps). Plan the buffer in the MemoryPlan (cuda/arena.h) before the first step.",
      bytes, what, step_guard_region().c_str()));
}

void check_host_sync_allowed(const char* what) {
  if (t_guards.empty()) return;
  throw Error(strprintf(
      "host synchronisation '%s' during %s: a step never waits for the device (it would invalidate "
      "a CUDA-graph capture and stall eager steps). Move the wait after the step, or keep the value "
      "in device memory.",
      what, step_guard_region().c_str()));
}

void* device_allocate(size_t bytes, const char* what) {
  check_allocation_allowed(what, bytes);
  void* ptr = nullptr;
  const cudaError_t err = cudaMalloc(&ptr, bytes == 0 ? 1 : bytes);
  if (err != cudaSuccess) {
    size_t free_b = 0, total_b = 0;
    // A failed cudaMalloc leaves a (non-sticky) last error: clear it so a later launch check does
    // not report it as its own.
    (void)cudaGetLastError();
    std::string message = strprintf("cudaMalloc of %s for '%s' failed: %s: %s", human_bytes(bytes).c_str(),
                                    what, cudaGetErrorName(err), cudaGetErrorString(err));
    if (cudaMemGetInfo(&free_b, &total_b) == cudaSuccess) {
      message += strprintf(" (device free %s of %s)", human_bytes(free_b).c_str(), human_bytes(total_b).c_str());
    }
    if (*error_hint(err)) message += std::string("\n  hint: ") + error_hint(err);
    throw Error(message);
  }
  remember_allocation(ptr, bytes == 0 ? 1 : bytes);  // so device_free keeps device_bytes_allocated() exact
  return ptr;
}

void device_free(void* ptr, const char* what) {
  if (ptr == nullptr) return;
  if (!t_guards.empty()) {
    throw Error(strprintf("freeing device memory '%s' during %s: nothing may be allocated or freed inside a "
                          "step or a CUDA-graph capture. Free it after the last step.",
                          what, step_guard_region().c_str()));
  }
  SG_CUDA_CHECK(cudaFree(ptr));
  forget_allocation(ptr);
}

void device_free_noexcept(void* ptr, const char* what) noexcept {
  if (ptr == nullptr) return;
  if (!t_guards.empty()) {
    // Destroying an owner inside a step is a bug, but a destructor must not throw: say so and free anyway.
    log_freed_during_step("device memory", what);
  }
  const cudaError_t err = cudaFree(ptr);
  if (err != cudaSuccess) {
    log_cuda_error(err, "cudaFree", __FILE__, __LINE__);
    return;
  }
  forget_allocation(ptr);
}

void* pinned_host_allocate(size_t bytes, const char* what) {
  check_allocation_allowed(what, bytes);
  void* ptr = nullptr;
  SG_CUDA_CHECK(cudaMallocHost(&ptr, bytes == 0 ? 1 : bytes));
  return ptr;
}

void pinned_host_free_noexcept(void* ptr, const char* what) noexcept {
  if (ptr == nullptr) return;
  if (!t_guards.empty()) log_freed_during_step("pinned host memory", what);  // cudaFreeHost synchronises the device
  SG_CUDA_CHECK_NOEXCEPT(cudaFreeHost(ptr));
}

size_t device_bytes_allocated() { return g_device_bytes.load(); }

}  // namespace sg::cuda
