// Causal conv1d + SiLU launchers and scratch planning (kernels: causal_conv1d.cuh).
#include "kernels/causal_conv1d.h"

#include "kernels/causal_conv1d.cuh"
#include "kernels/cuda_launch.cuh"

namespace sg::kernels {

int64_t causal_conv1d_backward_num_partials(int64_t B, int64_t S) { return conv1d::backward_partials(B, S); }

size_t causal_conv1d_backward_scratch_bytes(int64_t B, int64_t S, int64_t C) {
  return static_cast<size_t>(causal_conv1d_backward_num_partials(B, S) * (kCausalConv1dWidth + 1) * C) *
         sizeof(float);
}

void causal_conv1d_silu_forward(cudaStream_t stream, const CausalConv1dForwardParams& p) {
  conv1d::run_forward(detail::CudaLaunch{stream}, p);
}

void causal_conv1d_silu_backward(cudaStream_t stream, const CausalConv1dBackwardParams& p) {
  conv1d::run_backward(detail::CudaLaunch{stream}, p);
}

}  // namespace sg::kernels
