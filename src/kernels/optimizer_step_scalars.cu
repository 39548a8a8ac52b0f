// optimizer_step_scalars launcher (kernel: optimizer_step_scalars.cuh).
#include "kernels/optimizer_step_scalars.h"

#include "kernels/cuda_launch.cuh"
#include "kernels/optimizer_step_scalars.cuh"

namespace sg::kernels {

void optimizer_step_scalars(cudaStream_t stream, const OptimizerStepScalarsParams& p) {
  optimizer_scalars::run(detail::CudaLaunch{stream}, p);
}

}  // namespace sg::kernels
