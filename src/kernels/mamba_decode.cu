// Mamba2 decoding launchers: the conv1d and the SSD scan continued from kept state (kernels:
// mamba_decode.cuh).
#include "kernels/cuda_launch.cuh"
#include "kernels/mamba_decode.cuh"
#include "kernels/mamba_decode.h"

namespace sg::kernels {

void causal_conv1d_silu_continued(cudaStream_t stream, const CausalConv1dContinuedParams& p) {
  mamba_decode::run_conv(detail::CudaLaunch{stream}, p);
}

void ssd_scan_continued(cudaStream_t stream, const SsdScanContinuedParams& p) {
  mamba_decode::run_scan(detail::CudaLaunch{stream}, p);
}

}  // namespace sg::kernels
