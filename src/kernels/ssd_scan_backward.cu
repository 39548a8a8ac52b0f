// SSD scan backward launcher (kernels: ssd_scan_backward.cuh).
#include "kernels/ssd_scan.h"
#include "kernels/ssd_scan_host.cuh"

namespace sg::kernels {

void ssd_scan_backward(cudaStream_t stream, const SsdScanBackwardParams& p) {
  const ssd::SsdArgs a = ssd::backward_args(p);
  if (a.batch == 0 || a.seqlen == 0) return;
  ssd::dispatch_dstate<ssd::BackwardRunner>(p.shape.dstate, ssd::CudaLaunch{stream}, a);
}

}  // namespace sg::kernels
