#pragma once
// CUDA error checking that names the call, the file:line and a hint for the usual causes.
#include <cuda_runtime.h>

#include <cstddef>
#include <string>

#include "core/error.h"

namespace sg::cuda {

// A short, actionable hint for common error codes ("" when there is nothing useful to add).
const char* error_hint(cudaError_t err);

[[noreturn]] void throw_cuda_error(cudaError_t err, const char* call, const char* file, int line);
// The same message, logged to stderr instead of thrown: for destructors and other noexcept paths, where a
// throw would terminate the process and a dropped error would hide why a run ended. Also clears the
// (non-sticky) last error, so the next launch check does not report this failure as its own.
void log_cuda_error(cudaError_t err, const char* call, const char* file, int line) noexcept;

// cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes): a kernel's opt-in to more
// than 48 KiB of dynamic shared memory (a host-side attribute, capturable). On failure throws sg::Error naming
// the kernel, the bytes asked for and the device's opt-in limit per block, where the runtime says only
// "invalid argument".
void set_max_dynamic_shared_memory(const void* kernel, const char* kernel_name, size_t bytes);

}  // namespace sg::cuda

// SG_CUDA_CHECK(cudaMalloc(...)): throws sg::Error "cudaMalloc(...) failed: <name>: <text> at f:l. hint".
#define SG_CUDA_CHECK(call)                                                          \
  do {                                                                               \
    const cudaError_t sg_err_ = (call);                                              \
    if (sg_err_ != cudaSuccess) ::sg::cuda::throw_cuda_error(sg_err_, #call, __FILE__, __LINE__); \
  } while (0)

// SG_CUDA_CHECK_NOEXCEPT(cudaFree(...)): on a cleanup path, logs the failure (log_cuda_error) and goes on.
#define SG_CUDA_CHECK_NOEXCEPT(call)                                                          \
  do {                                                                                        \
    const cudaError_t sg_err_ = (call);                                                       \
    if (sg_err_ != cudaSuccess) ::sg::cuda::log_cuda_error(sg_err_, #call, __FILE__, __LINE__); \
  } while (0)

// After every kernel launch: catches bad launch configurations immediately (does not synchronise).
#define SG_CUDA_CHECK_LAUNCH(kernel_name)                                                 \
  do {                                                                                    \
    const cudaError_t sg_err_ = cudaGetLastError();                                       \
    if (sg_err_ != cudaSuccess)                                                           \
      ::sg::cuda::throw_cuda_error(sg_err_, "launch of " kernel_name, __FILE__, __LINE__); \
  } while (0)
