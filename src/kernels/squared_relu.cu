// Squared ReLU launchers (kernel: squared_relu.cuh).
#include "kernels/squared_relu.h"

#include "kernels/cuda_launch.cuh"
#include "kernels/squared_relu.cuh"

namespace sg::kernels {

void squared_relu_forward(cudaStream_t stream, const SquaredReluForwardParams& p) {
  squared_relu::run_forward(detail::CudaLaunch{stream}, p);
}

void squared_relu_backward(cudaStream_t stream, const SquaredReluBackwardParams& p) {
  squared_relu::run_backward(detail::CudaLaunch{stream}, p);
}

}  // namespace sg::kernels
