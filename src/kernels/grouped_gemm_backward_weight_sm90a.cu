// The CUTLASS grouped GEMM of GroupedLinearBackwardWeight (kernels/grouped_gemm.h) with the 128x192 tile
// (WeightGradTile::kWide), in its own translation unit so the instantiations compile in parallel (built for
// sm_90a only). The 128x96 tile is grouped_gemm_backward_weight_narrow_sm90a.cu.
#include "kernels/grouped_gemm_cutlass.cuh"

namespace sg::kernels::detail {

std::unique_ptr<GroupedGemmBackend> make_grouped_backward_weight_backend(const GroupedGemmDims& dims, int sm_count) {
  return std::make_unique<grouped_cutlass::Backend<GroupedGemmOp::kBackwardWeight>>(dims, sm_count);
}

}  // namespace sg::kernels::detail
