// dt / A launchers and scratch planning (kernels: mamba_dt.cuh).
#include "kernels/mamba_dt.h"

#include "kernels/cuda_launch.cuh"
#include "kernels/mamba_dt.cuh"

namespace sg::kernels {

int64_t mamba_dt_backward_num_partials(int64_t T) { return mamba_dt::backward_partials(T); }

size_t mamba_dt_backward_scratch_bytes(int64_t T, int64_t H) {
  return static_cast<size_t>(mamba_dt_backward_num_partials(T) * H) * sizeof(float);
}

void mamba_dt_forward(cudaStream_t stream, const MambaDtForwardParams& p) {
  mamba_dt::run_dt_forward(detail::CudaLaunch{stream}, p);
}

void mamba_dt_backward(cudaStream_t stream, const MambaDtBackwardParams& p) {
  mamba_dt::run_dt_backward(detail::CudaLaunch{stream}, p);
}

void mamba_a_forward(cudaStream_t stream, const MambaAForwardParams& p) {
  mamba_dt::run_a_forward(detail::CudaLaunch{stream}, p);
}

void mamba_a_backward(cudaStream_t stream, const MambaABackwardParams& p) {
  mamba_dt::run_a_backward(detail::CudaLaunch{stream}, p);
}

}  // namespace sg::kernels
