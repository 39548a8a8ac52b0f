#include "cuda/check.h"

#include <climits>
#include <cstdio>

#include "core/log.h"
#include "core/strings.h"

namespace sg::cuda {

const char* error_hint(cudaError_t err) {
  switch (err) {
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
      return "no usable GPU: check nvidia-smi; without a GPU, stepgraph train uses the CPU backend";
    case cudaErrorMemoryAllocation:
      return "out of device memory: in training, reduce train.micro_batch_size or model.seq_length; in generate, "
             "--max-new-tokens or the prompts";
    case cudaErrorStreamCaptureUnsupported:
    case cudaErrorStreamCaptureInvalidated:
    case cudaErrorStreamCaptureImplicit:
    case cudaErrorStreamCaptureIsolation:
    case cudaErrorStreamCaptureUnjoined:
    case cudaErrorStreamCaptureWrongThread:
    case cudaErrorCapturedEvent:
      return "an operation that is illegal during CUDA-graph capture ran: a host synchronisation "
             "(cudaDeviceSynchronize, cudaStreamSynchronize, a blocking cudaMemcpy), an allocation "
             "(cudaMalloc/cudaFree), or work on the legacy default stream";
    case cudaErrorIllegalAddress:
      return "a kernel read or wrote out of bounds; rerun the GPU tests under compute-sanitizer";
    case cudaErrorInvalidConfiguration:
      return "bad launch configuration (grid/block size or shared memory)";
    default:
      return "";
  }
}

namespace {

std::string cuda_error_message(cudaError_t err, const char* call, const char* file, int line) {
  const char* hint = error_hint(err);
  return strprintf("%s failed: %s: %s [%s:%d]%s%s", call, cudaGetErrorName(err), cudaGetErrorString(err), file,
                   line, *hint ? "\n  hint: " : "", hint);
}

}  // namespace

void throw_cuda_error(cudaError_t err, const char* call, const char* file, int line) {
  throw Error(cuda_error_message(err, call, file, line));
}

void log_cuda_error(cudaError_t err, const char* call, const char* file, int line) noexcept {
  (void)cudaGetLastError();  // already reported here: the next launch check must not take it for its own
  try {
    log::error(cuda_error_message(err, call, file, line));
  } catch (...) {
    // Out of memory for the message: say what failed without allocating.
    std::fprintf(stderr, "error: %s failed: %s [%s:%d]\n", call, cudaGetErrorName(err), file, line);
  }
}

void set_max_dynamic_shared_memory(const void* kernel, const char* kernel_name, size_t bytes) {
  const cudaError_t err =
      bytes > static_cast<size_t>(INT_MAX)
          ? cudaErrorInvalidValue
          : cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes));
  if (err == cudaSuccess) return;
  (void)cudaGetLastError();  // reported here, not by the next launch check
  // The limit, for the message only (the queries' own failures leave it unknown).
  int device = 0, limit = -1;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device) != cudaSuccess) {
    (void)cudaGetLastError();
    limit = -1;
  }
  const std::string limit_text =
      limit >= 0 ? strprintf("%d bytes on device %d", limit, device) : std::string("unknown");
  throw Error(strprintf(
      "cudaFuncSetAttribute(%s, cudaFuncAttributeMaxDynamicSharedMemorySize, %zu) failed: %s: %s: "
      "kernel %s asks for %zu bytes of dynamic shared memory per block; the most a block may opt "
      "into is %s (cudaDevAttrMaxSharedMemoryPerBlockOptin, less the kernel's static shared memory)",
      kernel_name, bytes, cudaGetErrorName(err), cudaGetErrorString(err), kernel_name, bytes, limit_text.c_str()));
}

}  // namespace sg::cuda
