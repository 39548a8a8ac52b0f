#include "cuda/device.h"

#include <cuda_runtime.h>

#include <map>
#include <memory>
#include <mutex>

#include "core/error.h"
#include "core/strings.h"
#include "cuda/check.h"

namespace sg::cuda {

std::string DeviceProperties::summary() const {
  return strprintf("%s (sm_%d%d, %d SMs, %s)", name.c_str(), cc_major, cc_minor, sm_count,
                   human_bytes(total_memory).c_str());
}

int device_count() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();  // no driver / no device: not an error for this query
    return 0;
  }
  return count;
}

int current_device() {
  require_device("current_device");
  int device = 0;
  SG_CUDA_CHECK(cudaGetDevice(&device));
  return device;
}

void require_device(const char* what) {
  if (device_count() > 0) return;
  throw Error(strprintf("%s needs a CUDA GPU, but none is usable on this machine (check nvidia-smi "
                        "and the driver; without a GPU, stepgraph runs its CPU backend)",
                        what));
}

const DeviceProperties& device_properties(int device) {
  static std::mutex mutex;
  static std::map<int, std::unique_ptr<DeviceProperties>> cache;  // never freed: read-only after load
  if (device < 0) device = current_device();
  std::lock_guard<std::mutex> lock(mutex);
  auto& slot = cache[device];
  if (!slot) {
    const int count = device_count();
    SG_CHECK(device < count, strprintf("device %d does not exist (%d CUDA devices)", device, count));
    cudaDeviceProp prop{};
    SG_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
    auto p = std::make_unique<DeviceProperties>();
    p->index = device;
    p->name = prop.name;
    p->sm_count = prop.multiProcessorCount;
    p->cc_major = prop.major;
    p->cc_minor = prop.minor;
    p->total_memory = prop.totalGlobalMem;
    p->l2_cache_bytes = static_cast<size_t>(prop.l2CacheSize);
    p->shared_memory_per_block_optin = prop.sharedMemPerBlockOptin;
    p->shared_memory_per_sm = prop.sharedMemPerMultiprocessor;
    p->max_threads_per_sm = prop.maxThreadsPerMultiProcessor;
    slot = std::move(p);
  }
  return *slot;
}

}  // namespace sg::cuda
