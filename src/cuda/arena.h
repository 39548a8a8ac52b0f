#pragma once
// Static device memory: every buffer of a training run (parameters, fp32 main weights, gradients,
// optimizer state, activations, workspaces, the input batch) is declared in a MemoryPlan before the
// first step and backed by ONE device allocation (Arena). Eager steps, captured steps and replayed
// graphs therefore touch the same addresses, and a graph costs no extra activation memory.
//
// The plan and its layout are pure CPU (testable without a GPU); only Arena touches the device.
//
// Allocation guard: every device allocation stepgraph makes goes through device_allocate(). While a
// StepGuard is alive on this thread (a step, a region, a capture), device_allocate, device_free and
// check_host_sync_allowed throw sg::Error naming the guarded region and the offending operation —
// the same mistake that would invalidate a capture is caught in eager steps too.
#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/error.h"

namespace sg::cuda {

// ---------------------------------------------------------------------------------------------
// Categories and the plan
// ---------------------------------------------------------------------------------------------

enum class MemoryCategory : uint8_t {
  parameters,       // bf16 compute weights
  main_weights,     // fp32 master weights
  gradients,        // fp32 main_grad, accumulated over microbatches
  optimizer_state,  // fp32 Adam moments, device-resident scalars of the optimizer
  activations,      // saved activations and per-step scratch that outlives one kernel
  workspaces,       // cuBLASLt/cuDNN workspaces, reduction scratch
  inputs,           // the step's input batch (tokens, labels, loss mask)
};
inline constexpr int kNumMemoryCategories = 7;
const char* memory_category_name(MemoryCategory category);  // "parameters", "main_weights", ...

// Every category starts on this boundary; the default alignment of one allocation.
inline constexpr size_t kArenaAlignment = 256;

// A handle to one planned allocation. Cheap to copy; valid only with the plan (and the arena built
// from it) that issued it — using it with another arena throws.
struct MemorySlot {
  uint32_t index = UINT32_MAX;
  uint32_t plan_id = 0;
  bool valid() const { return index != UINT32_MAX; }
};

struct PlannedAllocation {
  std::string name;
  MemoryCategory category = MemoryCategory::activations;
  size_t bytes = 0;      // as requested
  size_t alignment = 0;  // power of two
  size_t offset = 0;     // from the arena base; set by MemoryPlan::layout()
};

// Byte range [begin, end) of one category inside the arena. Categories are laid out contiguously in
// enum order, so e.g. all gradients can be zeroed with one memset of category_range(gradients).
struct CategoryRange {
  size_t begin = 0;
  size_t end = 0;
  size_t bytes() const { return end - begin; }
};

// The result of planning: offsets of every allocation and the single allocation's size.
struct MemoryLayout {
  std::vector<PlannedAllocation> allocations;  // in MemorySlot index order, offsets filled in
  CategoryRange categories[kNumMemoryCategories];
  size_t requested_bytes[kNumMemoryCategories] = {};  // sum of requested bytes (no padding)
  size_t total_bytes = 0;  // size of the one allocation (padding included), multiple of kArenaAlignment

  const CategoryRange& range(MemoryCategory c) const { return categories[static_cast<int>(c)]; }
};

class MemoryPlan {
 public:
  MemoryPlan();

  // Declares a named buffer. Names are unique ("layer3.attn.qkv_weight"); alignment must be a power
  // of two (at most 4096). Zero bytes is allowed (an empty tensor) and gets a valid, aligned offset.
  MemorySlot add(std::string name, MemoryCategory category, size_t bytes,
                 size_t alignment = kArenaAlignment);
  template <class T>
  MemorySlot add_array(std::string name, MemoryCategory category, size_t count,
                       size_t alignment = kArenaAlignment) {
    return add(std::move(name), category, count * sizeof(T), alignment);
  }

  const PlannedAllocation& at(MemorySlot slot) const;  // throws on a foreign/invalid slot
  MemorySlot find(const std::string& name) const;      // invalid slot when absent
  size_t size() const { return allocations_.size(); }
  uint32_t id() const { return id_; }

  // Sum of requested bytes per category / overall (padding excluded).
  size_t category_bytes(MemoryCategory category) const;
  size_t requested_bytes() const;

  // Categories in enum order, each starting on kArenaAlignment; inside a category, allocations in
  // the order they were added, each on its own alignment. Deterministic, overlap-free.
  MemoryLayout layout() const;

 private:
  uint32_t id_;
  std::vector<PlannedAllocation> allocations_;
  std::unordered_map<std::string, uint32_t> index_by_name_;  // find() in O(1): plans hold ~10 buffers a layer
};

// ---------------------------------------------------------------------------------------------
// The arena: one device allocation for a plan
// ---------------------------------------------------------------------------------------------

class Arena {
 public:
  // Lays out the plan and makes ONE device allocation of layout().total_bytes (through
  // device_allocate, so it fails under a StepGuard). Records device free/total before and after.
  // Contents are NOT initialised (call zero() or initialise explicitly).
  explicit Arena(const MemoryPlan& plan);
  ~Arena();
  Arena(const Arena&) = delete;
  Arena& operator=(const Arena&) = delete;
  Arena(Arena&& other) noexcept;
  Arena& operator=(Arena&& other) noexcept;

  template <class T>
  T* get(MemorySlot slot) const {
    return static_cast<T*>(raw(slot));
  }
  void* raw(MemorySlot slot) const;  // throws sg::Error on a slot from another plan
  size_t bytes(MemorySlot slot) const;
  template <class T>
  size_t count(MemorySlot slot) const {
    return bytes(slot) / sizeof(T);
  }

  // Size in bytes of a category's contiguous range (see CategoryRange).
  size_t category_bytes(MemoryCategory category) const { return layout_.range(category).bytes(); }

  const MemoryLayout& layout() const { return layout_; }
  void* base() const { return base_; }
  size_t total_bytes() const { return layout_.total_bytes; }

  // Fills the whole arena with zero bytes (setup time; synchronous).
  void zero();

  // Table: bytes per category, total, padding, device free/total before and after the allocation.
  std::string breakdown() const;

 private:
  void release() noexcept;

  uint32_t plan_id_ = 0;
  MemoryLayout layout_;
  unsigned char* base_ = nullptr;
  size_t free_before_ = 0, total_before_ = 0, free_after_ = 0, total_after_ = 0;
};

// Pure-CPU formatting of a layout (Arena::breakdown uses it; tests check it).
std::string format_memory_breakdown(const MemoryLayout& layout, size_t free_before,
                                    size_t total_before, size_t free_after, size_t total_after);

// ---------------------------------------------------------------------------------------------
// Allocation guard
// ---------------------------------------------------------------------------------------------

// While alive, device allocation/free and host synchronisation through stepgraph's wrappers throw
// on this thread. Guards nest ("step 12 > capture layer 3 attn forward"); the message names the
// whole chain. Thread-local, matching cudaStreamCaptureModeThreadLocal: a data-loader thread is
// not affected.
class StepGuard {
 public:
  explicit StepGuard(std::string region);
  ~StepGuard();
  StepGuard(const StepGuard&) = delete;
  StepGuard& operator=(const StepGuard&) = delete;
};

bool step_guard_active();
std::string step_guard_region();  // "step 12 > layer 3 attn forward", "" when none

// Throws sg::Error when a StepGuard is active: "<what> during <region>: ...why and fix".
void check_allocation_allowed(const char* what, size_t bytes);
void check_host_sync_allowed(const char* what);

// THE device allocation function of stepgraph (the arena, cuBLASLt/cuDNN setup, tests' helpers
// route through it). `what` names the buffer for error messages. Throws under a StepGuard and on
// cudaMalloc failure (naming `what` and the size).
void* device_allocate(size_t bytes, const char* what);
void device_free(void* ptr, const char* what);  // no-op for nullptr; throws under a StepGuard
// For destructors: frees even under a StepGuard (a bug, logged to stderr like a failed cudaFree), never
// throws. Keeps device_bytes_allocated() exact either way.
void device_free_noexcept(void* ptr, const char* what) noexcept;
// Same, for page-locked host memory (cudaMallocHost also synchronises the device). Pinned buffers live as
// long as their owner, so they are freed only from destructors: the free never throws (as above).
void* pinned_host_allocate(size_t bytes, const char* what);
void pinned_host_free_noexcept(void* ptr, const char* what) noexcept;

// Bytes currently held through device_allocate (what stepgraph owns; the driver's pools excluded).
size_t device_bytes_allocated();

}  // namespace sg::cuda
