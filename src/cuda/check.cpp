#include "cuda/check.h"

#include "core/strings.h"

namespace sg::cuda {

const char* error_hint(cudaError_t err) {
  switch (err) {
    case cudaErrorNoDevice:
    case cudaErrorInsufficientDriver:
      return "no usable GPU: check nvidia-smi; without a GPU, stepgraph train uses the CPU backend";
    case cudaErrorMemoryAllocation:
      return "out of device memory: reduce train.micro_batch_size or model.seq_length";
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

void throw_cuda_error(cudaError_t err, const char* call, const char* file, int line) {
  const char* hint = error_hint(err);
  throw Error(strprintf("%s failed: %s: %s [%s:%d]%s%s", call, cudaGetErrorName(err),
                        cudaGetErrorString(err), file, line, *hint ? "\n  hint: " : "", hint));
}

}  // namespace sg::cuda
