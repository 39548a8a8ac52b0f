#include "cuda/check.h"

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

}  // namespace sg::cuda
