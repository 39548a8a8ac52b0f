#pragma once
// The GPU's properties, read once per device and cached (cudaGetDeviceProperties is slow: ~ms).
#include <cstddef>
#include <string>

namespace sg::cuda {

struct DeviceProperties {
  int index = 0;
  std::string name;
  int sm_count = 0;
  int cc_major = 0;
  int cc_minor = 0;
  size_t total_memory = 0;          // bytes
  size_t l2_cache_bytes = 0;
  size_t shared_memory_per_block_optin = 0;  // bytes a kernel may opt into
  size_t shared_memory_per_sm = 0;
  int max_threads_per_sm = 0;

  int compute_capability() const { return cc_major * 10 + cc_minor; }  // 90 for H100/H200
  // "NVIDIA H200 (sm_90, 132 SMs, 139.8 GiB)"
  std::string summary() const;
};

// Number of usable CUDA devices; 0 (never an exception) on a machine without a GPU or driver.
int device_count();

// The current device's index (cudaGetDevice); throws when there is no usable device.
int current_device();

// Properties of `device` (-1: the current one), read on first use and cached; thread-safe.
// Throws sg::Error naming the device when it does not exist.
const DeviceProperties& device_properties(int device = -1);

// Throws sg::Error with a hint when no GPU is usable (what: the operation that needs one).
void require_device(const char* what);

}  // namespace sg::cuda
