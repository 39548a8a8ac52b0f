#pragma once
// The launch policy of kernels written once over `launch(name, kernel, grid, threads, smem_bytes, args)`,
// so that the CPU emulator of the tests (sg::emu::Launch, tests/simt_emulator.h) runs the very same launch
// sequence. This one is the real launcher's: <<<>>> on the stream, opting into more than 48 KiB of dynamic
// shared memory when asked (a host-side function attribute, not a stream operation: capturable).
#include <cuda_runtime.h>

#include <cstddef>

#include "cuda/check.h"

namespace sg::kernels::detail {

struct CudaLaunch {
  cudaStream_t stream;
  template <class Args>
  void operator()(const char* name, void (*kernel)(Args), dim3 grid, int threads, size_t smem_bytes,
                  const Args& args) const {
    if (grid.x == 0 || grid.y == 0 || grid.z == 0) return;
    if (smem_bytes > 48 * 1024) {
      ::sg::cuda::set_max_dynamic_shared_memory(reinterpret_cast<const void*>(kernel), name, smem_bytes);
    }
    kernel<<<grid, threads, smem_bytes, stream>>>(args);
    const cudaError_t err = cudaGetLastError();
    if (err != cudaSuccess) ::sg::cuda::throw_cuda_error(err, name, __FILE__, __LINE__);
  }
};

}  // namespace sg::kernels::detail
