// Launchers of the grouped linears' per-group biases (kernels: grouped_linear_bias.cuh).
#include "kernels/cuda_launch.cuh"
#include "kernels/grouped_linear_bias.cuh"
#include "kernels/grouped_linear_bias.h"

namespace sg::kernels {

int64_t grouped_bias_num_partials(int64_t max_rows, int num_groups) {
  return grouped_bias::num_partials(max_rows, num_groups);
}

size_t grouped_bias_scratch_bytes(int64_t max_rows, int num_groups, int64_t cols) {
  return static_cast<size_t>(grouped_bias_num_partials(max_rows, num_groups) * cols) * sizeof(float);
}

void grouped_bias_forward(cudaStream_t stream, const GroupedBiasForwardParams& p) {
  grouped_bias::run_forward(detail::CudaLaunch{stream}, p);
}

void grouped_bias_backward(cudaStream_t stream, const GroupedBiasBackwardParams& p) {
  grouped_bias::run_backward(detail::CudaLaunch{stream}, p);
}

}  // namespace sg::kernels
