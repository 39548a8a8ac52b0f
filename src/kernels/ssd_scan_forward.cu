// SSD scan forward launcher and the workspace size (kernels: ssd_scan_forward.cuh).
#include "kernels/ssd_scan.h"
#include "kernels/ssd_scan_host.cuh"

namespace sg::kernels {

size_t ssd_workspace_bytes(const SsdShape& shape) {
  ssd::check_shape("ssd_workspace_bytes", shape);
  return ssd::ssd_workspace_layout(shape).total;
}

void ssd_scan_forward(cudaStream_t stream, const SsdScanForwardParams& p) {
  const ssd::SsdArgs a = ssd::forward_args(p);
  if (a.batch == 0 || a.seqlen == 0) return;
  ssd::dispatch_dstate<ssd::ForwardRunner>(p.shape.dstate, ssd::CudaLaunch{stream}, a);
}

}  // namespace sg::kernels
