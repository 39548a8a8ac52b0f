// Launchers of the shared expert's sigmoid gate (kernels: moe_shared_gate.cuh).
#include "kernels/cuda_launch.cuh"
#include "kernels/moe_shared_gate.cuh"
#include "kernels/moe_shared_gate.h"

namespace sg::kernels {

void moe_shared_gate_forward(cudaStream_t stream, const MoeSharedGateForwardParams& p) {
  shared_gate::run_forward(detail::CudaLaunch{stream}, p);
}

void moe_shared_gate_backward(cudaStream_t stream, const MoeSharedGateBackwardParams& p) {
  shared_gate::run_backward(detail::CudaLaunch{stream}, p);
}

void moe_shared_gate_input_grad(cudaStream_t stream, const MoeSharedGateInputGradParams& p) {
  shared_gate::run_input_grad(detail::CudaLaunch{stream}, p);
}

}  // namespace sg::kernels
