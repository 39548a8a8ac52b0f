// RoPE launchers (kernel: rope.cuh).
#include "kernels/rope.h"

#include "kernels/cuda_launch.cuh"
#include "kernels/rope.cuh"

namespace sg::kernels {

void rope_forward(cudaStream_t stream, const RopeParams& p) { rope::run_forward(detail::CudaLaunch{stream}, p); }
void rope_backward(cudaStream_t stream, const RopeParams& p) { rope::run_backward(detail::CudaLaunch{stream}, p); }

size_t rope_table_bytes(int64_t positions, int64_t head_dim) { return rope::table_bytes(positions, head_dim); }
RopeTable rope_table_build(cudaStream_t stream, const RopeTableParams& p) {
  return rope::run_table_build(detail::CudaLaunch{stream}, p);
}

}  // namespace sg::kernels
