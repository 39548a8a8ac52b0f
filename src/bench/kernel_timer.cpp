#include "bench/kernel_timer.h"

#include <cuda_runtime.h>
#include <cupti.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>

#include "core/error.h"
#include "core/log.h"
#include "core/strings.h"
#include "cuda/check.h"

namespace sg::bench {
namespace {

constexpr size_t kBufferBytes = size_t{8} << 20;  // per CUPTI buffer; a 1b step has a few thousand records
constexpr size_t kBufferAlignment = 8;            // CUPTI requires 8-byte aligned activity buffers
constexpr CUpti_ActivityKind kKinds[] = {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMSET,
                                         CUPTI_ACTIVITY_KIND_MEMCPY};

std::string cupti_error(CUptiResult result) {
  const char* text = nullptr;
  if (cuptiGetResultString(result, &text) != CUPTI_SUCCESS || text == nullptr) text = "unknown CUPTI error";
  return strprintf("%s (%d)", text, static_cast<int>(result));
}

void check_cupti(CUptiResult result, const char* call) {
  if (result == CUPTI_SUCCESS) return;
  throw Error(
      strprintf("%s failed: %s. Kernel timing needs CUPTI (libcupti from the CUDA toolkit, and no other "
                "profiler attached); without it, run bench with --floor-steps 0, generate without --profile",
                call, cupti_error(result).c_str()));
}

// On the noexcept path (the destructor): check_cupti's failure, logged to stderr instead of thrown.
void log_cupti_error(CUptiResult result, const char* call, const char* file, int line) noexcept {
  try {
    log::error(strprintf("%s failed: %s [%s:%d]", call, cupti_error(result).c_str(), file, line));
  } catch (...) {
    std::fprintf(stderr, "error: %s failed: CUPTI error %d [%s:%d]\n", call, static_cast<int>(result), file, line);
  }
}

#define SG_CUPTI_CHECK_NOEXCEPT(call)                                                   \
  do {                                                                                  \
    const CUptiResult sg_result_ = (call);                                              \
    if (sg_result_ != CUPTI_SUCCESS) log_cupti_error(sg_result_, #call, __FILE__, __LINE__); \
  } while (0)

// Shared with CUPTI's callbacks, which may run on CUPTI's thread.
struct Sink {
  std::mutex mutex;
  bool collecting = false;
  bool keep_names = false;
  std::vector<ActivityRecord> records;
  uint64_t dropped = 0;
  std::string error;  // first error seen inside a callback (callbacks must not throw)
};

Sink& sink() {
  static Sink s;
  return s;
}

std::atomic<bool> g_timer_alive{false};

bool convert(const CUpti_Activity* activity, bool keep_names, ActivityRecord& out) {
  switch (activity->kind) {
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
    case CUPTI_ACTIVITY_KIND_KERNEL: {
      const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(activity);
      out.kind = ActivityKind::kernel;
      out.start_ns = k->start;
      out.end_ns = k->end;
      out.stream = k->streamId;
      out.graph_id = k->graphId;
      if (keep_names && k->name != nullptr) out.name = k->name;
      return true;
    }
    case CUPTI_ACTIVITY_KIND_MEMSET: {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemset4*>(activity);
      out.kind = ActivityKind::memset;
      out.start_ns = m->start;
      out.end_ns = m->end;
      out.stream = m->streamId;
      out.graph_id = m->graphId;
      out.bytes = m->bytes;
      if (keep_names) out.name = "memset";
      return true;
    }
    case CUPTI_ACTIVITY_KIND_MEMCPY: {
      const auto* m = reinterpret_cast<const CUpti_ActivityMemcpy6*>(activity);
      out.kind = ActivityKind::memcpy;
      out.start_ns = m->start;
      out.end_ns = m->end;
      out.stream = m->streamId;
      out.graph_id = m->graphId;
      out.bytes = m->bytes;
      if (keep_names) out.name = "memcpy";
      return true;
    }
    default:
      return false;
  }
}

void CUPTIAPI buffer_requested(uint8_t** buffer, size_t* size, size_t* max_records) {
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(kBufferAlignment, kBufferBytes));
  *size = *buffer != nullptr ? kBufferBytes : 0;  // size 0: CUPTI drops the records (counted as dropped)
  *max_records = 0;                               // as many as fit
}

void CUPTIAPI buffer_completed(CUcontext context, uint32_t stream_id, uint8_t* buffer, size_t /*size*/,
                               size_t valid_size) {
  Sink& s = sink();
  {
    std::lock_guard<std::mutex> lock(s.mutex);
    CUpti_Activity* activity = nullptr;
    while (valid_size > 0) {
      const CUptiResult result = cuptiActivityGetNextRecord(buffer, valid_size, &activity);
      if (result == CUPTI_ERROR_MAX_LIMIT_REACHED) break;  // end of the buffer
      if (result != CUPTI_SUCCESS) {
        if (s.error.empty()) s.error = "cuptiActivityGetNextRecord: " + cupti_error(result);
        break;
      }
      if (!s.collecting) continue;
      ActivityRecord record;
      if (convert(activity, s.keep_names, record)) s.records.push_back(std::move(record));
    }
    size_t dropped = 0;
    const CUptiResult result = cuptiActivityGetNumDroppedRecords(context, stream_id, &dropped);
    if (result == CUPTI_SUCCESS) {
      s.dropped += dropped;
    } else if (s.error.empty()) {  // an unknown drop count: the window's records may be incomplete
      s.error = "cuptiActivityGetNumDroppedRecords: " + cupti_error(result);
    }
  }
  std::free(buffer);
}

void flush_all() { check_cupti(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), "cuptiActivityFlushAll"); }

}  // namespace

KernelTimer::KernelTimer() {
  SG_CHECK(!g_timer_alive.exchange(true), "only one KernelTimer may exist at a time (CUPTI callbacks are global)");
  try {
    check_cupti(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed), "cuptiActivityRegisterCallbacks");
  } catch (...) {
    g_timer_alive = false;
    throw;
  }
  std::lock_guard<std::mutex> lock(sink().mutex);
  sink().collecting = false;
  sink().records.clear();
  sink().dropped = 0;
  sink().error.clear();
}

KernelTimer::~KernelTimer() {
  for (const CUpti_ActivityKind kind : kKinds) SG_CUPTI_CHECK_NOEXCEPT(cuptiActivityDisable(kind));
  SG_CUPTI_CHECK_NOEXCEPT(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED));
  {
    std::lock_guard<std::mutex> lock(sink().mutex);
    sink().collecting = false;
    sink().records.clear();
  }
  g_timer_alive = false;
}

void KernelTimer::begin(bool keep_names) {
  SG_CHECK(!in_window_, "KernelTimer::begin: a window is already open");
  flush_all();  // whatever was still buffered belongs to no window
  {
    std::lock_guard<std::mutex> lock(sink().mutex);
    sink().records.clear();
    sink().keep_names = keep_names;
    sink().collecting = true;
  }
  for (const CUpti_ActivityKind kind : kKinds) check_cupti(cuptiActivityEnable(kind), "cuptiActivityEnable");
  in_window_ = true;
}

std::vector<ActivityRecord> KernelTimer::end() {
  SG_CHECK(in_window_, "KernelTimer::end without begin");
  in_window_ = false;
  // Every operation of the window must have finished before its records can be complete.
  SG_CUDA_CHECK(cudaDeviceSynchronize());
  flush_all();  // deliver while still enabled, then once more after disabling (nothing may be left behind)
  for (const CUpti_ActivityKind kind : kKinds) check_cupti(cuptiActivityDisable(kind), "cuptiActivityDisable");
  flush_all();
  std::vector<ActivityRecord> out;
  std::string error;
  {
    std::lock_guard<std::mutex> lock(sink().mutex);
    sink().collecting = false;
    out.swap(sink().records);
    error = sink().error;
  }
  SG_CHECK(error.empty(), "CUPTI activity buffer: " + error);
  return out;
}

uint64_t KernelTimer::dropped_records() const {
  std::lock_guard<std::mutex> lock(sink().mutex);
  return sink().dropped;
}

std::string KernelTimer::version() {
  uint32_t version = 0;
  if (const CUptiResult result = cuptiGetVersion(&version); result != CUPTI_SUCCESS) {
    return "CUPTI (version unknown: cuptiGetVersion failed: " + cupti_error(result) + ")";
  }
  return strprintf("CUPTI API %u", version);
}

}  // namespace sg::bench
