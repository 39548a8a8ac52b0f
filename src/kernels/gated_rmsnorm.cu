// Gated grouped RMSNorm launchers and scratch planning (kernels: gated_rmsnorm.cuh).
#include "kernels/gated_rmsnorm.h"

#include "kernels/cuda_launch.cuh"
#include "kernels/gated_rmsnorm.cuh"

namespace sg::kernels {

int64_t gated_rmsnorm_backward_num_partials(int64_t T) { return gated_norm::backward_partials(T); }

size_t gated_rmsnorm_backward_scratch_bytes(int64_t T, int64_t D, int64_t G) {
  const char* op = "gated_rmsnorm_backward_scratch_bytes";
  gated_norm::check_shape(op, T, D, G);
  gated_norm::check_group_width(op, D, G);
  return static_cast<size_t>(gated_rmsnorm_backward_num_partials(T) * D) * sizeof(float);
}

void gated_rmsnorm_forward(cudaStream_t stream, const GatedRmsNormForwardParams& p) {
  gated_norm::run_forward(detail::CudaLaunch{stream}, p);
}

void gated_rmsnorm_backward(cudaStream_t stream, const GatedRmsNormBackwardParams& p) {
  gated_norm::run_backward(detail::CudaLaunch{stream}, p);
}

}  // namespace sg::kernels
