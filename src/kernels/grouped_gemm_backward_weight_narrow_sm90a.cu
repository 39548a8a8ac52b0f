// The CUTLASS grouped GEMM of GroupedLinearBackwardWeight (kernels/grouped_gemm.h) with the 128x96 tile
// (WeightGradTile::kNarrow, grouped_gemm_tiles.h), in its own translation unit (built for sm_90a only).
#include "kernels/grouped_gemm_cutlass.cuh"

namespace sg::kernels::detail {

std::unique_ptr<GroupedGemmBackend> make_grouped_backward_weight_narrow_backend(const GroupedGemmDims& dims,
                                                                                int sm_count) {
  return std::make_unique<grouped_cutlass::Backend<GroupedGemmOp::kBackwardWeight,
                                                   grouped_cutlass::NarrowWeightGradConfig>>(dims, sm_count);
}

}  // namespace sg::kernels::detail
