// The launch policies' opt-in to more than 48 KiB of dynamic shared memory (kernels/cuda_launch.cuh, the SSD
// scan's copy in kernels/ssd_scan_host.cuh, both through cuda::set_max_dynamic_shared_memory): past the device's
// limit, the error names the kernel and the bytes it asked for and the limit, where cudaFuncSetAttribute alone
// said "invalid argument"; within it, the kernel runs with the memory it asked for.
#include <gtest/gtest.h>

#include <string>

#include "cuda/check.h"
#include "gpu_test_util.h"
#include "kernels/cuda_launch.cuh"
#include "test_util.h"

namespace {

using namespace sg;

struct OptInArgs {
  int* out;
  int n;
};

__global__ void opt_in_probe_kernel(OptInArgs a) {
  extern __shared__ int smem[];
  for (int i = threadIdx.x; i < a.n; i += blockDim.x) smem[i] = i;
  __syncthreads();
  if (threadIdx.x == 0) a.out[0] = smem[a.n - 1];
}

int opt_in_limit() {
  int device = 0, limit = 0;
  SG_CUDA_CHECK(cudaGetDevice(&device));
  SG_CUDA_CHECK(cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  return limit;
}

TEST(SharedMemoryOptIn, PastTheLimitTheErrorNamesTheKernelAndTheBytes) {
  const int limit = opt_in_limit();
  const size_t bytes = static_cast<size_t>(limit) + 1024;
  test::DeviceBuffer<int> out(1);
  const kernels::detail::CudaLaunch launch{nullptr};
  const OptInArgs args{out.get(), static_cast<int>(bytes / sizeof(int))};
  const std::string message =
      test::thrown_message([&] { launch("opt_in_probe_kernel", opt_in_probe_kernel, dim3(1), 128, bytes, args); });
  EXPECT_NE(message.find("opt_in_probe_kernel asks for " + std::to_string(bytes) + " bytes of dynamic shared memory"),
            std::string::npos)
      << message;
  EXPECT_NE(message.find(std::to_string(limit) + " bytes on device"), std::string::npos) << message;
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);  // reported, not left for the next launch check

  // The direct call, as the SSD scan's launch policy makes it.
  const std::string direct = test::thrown_message([&] {
    cuda::set_max_dynamic_shared_memory(reinterpret_cast<const void*>(opt_in_probe_kernel), "ssd_probe", bytes);
  });
  EXPECT_NE(direct.find("ssd_probe asks for " + std::to_string(bytes) + " bytes"), std::string::npos) << direct;
}

TEST(SharedMemoryOptIn, WithinTheLimitTheKernelRuns) {
  const size_t bytes = static_cast<size_t>(opt_in_limit());
  test::DeviceBuffer<int> out(1);
  const int n = static_cast<int>(bytes / sizeof(int));
  kernels::detail::CudaLaunch{nullptr}("opt_in_probe_kernel", opt_in_probe_kernel, dim3(1), 128, bytes,
                                       OptInArgs{out.get(), n});
  SG_CUDA_CHECK(cudaDeviceSynchronize());
  EXPECT_EQ(out.download()[0], n - 1);
}

}  // namespace
