// NVTX static injection: NVTX's loader calls InitializeInjectionNvtx2_fnptr (a strong definition here
// overrides the weak null one in the NVTX headers) on the first NVTX call, and we point the core
// module's RangePushA / RangePop slots at the recorder. NVTX_NO_IMPL: this file is a tool, not a user.
#define NVTX_NO_IMPL
#include <nvtx3/nvToolsExt.h>

#include <atomic>
#include <mutex>

#include "nvtx_recorder.h"

namespace {

std::mutex g_mutex;
bool g_recording = false;
int g_depth = 0;
std::vector<sg::test::NvtxRangeEvent> g_events;
std::atomic<bool> g_attached{false};

int NVTX_API record_push(const char* message) {
  std::lock_guard<std::mutex> lock(g_mutex);
  if (g_recording) g_events.push_back({message != nullptr ? message : "", g_depth});
  ++g_depth;
  return g_depth - 1;
}

int NVTX_API record_pop() {
  std::lock_guard<std::mutex> lock(g_mutex);
  --g_depth;
  return g_depth;
}

int NVTX_API initialize_injection(NvtxGetExportTableFunc_t get_export_table) {
  const auto* callbacks = static_cast<const NvtxExportTableCallbacks*>(get_export_table(NVTX_ETID_CALLBACKS));
  if (callbacks == nullptr) return 0;
  NvtxFunctionTable table = nullptr;
  unsigned int size = 0;
  if (callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &table, &size) == 0 || table == nullptr) return 0;
  if (size <= NVTX_CBID_CORE_RangePop) return 0;
  *table[NVTX_CBID_CORE_RangePushA] = reinterpret_cast<NvtxFunctionPointer>(&record_push);
  *table[NVTX_CBID_CORE_RangePop] = reinterpret_cast<NvtxFunctionPointer>(&record_pop);
  g_attached = true;
  return 1;
}

}  // namespace

extern "C" {
NvtxInitializeInjectionNvtxFunc_t InitializeInjectionNvtx2_fnptr = &initialize_injection;
}

namespace sg::test {

bool nvtx_recorder_attached() { return g_attached; }

void nvtx_recording_start() {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_events.clear();
  g_depth = 0;
  g_recording = true;
}

std::vector<NvtxRangeEvent> nvtx_recording_stop() {
  std::lock_guard<std::mutex> lock(g_mutex);
  g_recording = false;
  return std::move(g_events);
}

}  // namespace sg::test
