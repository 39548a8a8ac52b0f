// The CUTLASS grouped GEMM of GroupedLinearBackwardWeight into a bf16 dW (GroupedGemmDims::weight_grad_dtype) with
// the 128x96 tile (WeightGradTile::kNarrow), in its own translation unit (built for sm_90a only).
#include "kernels/grouped_gemm_cutlass.cuh"

namespace sg::kernels::detail {

std::unique_ptr<GroupedGemmBackend> make_grouped_backward_weight_narrow_bf16_backend(const GroupedGemmDims& dims,
                                                                                     int sm_count) {
  return std::make_unique<grouped_cutlass::Backend<GroupedGemmOp::kBackwardWeight,
                                                   grouped_cutlass::NarrowWeightGradConfig, cutlass::bfloat16_t>>(
      dims, sm_count);
}

}  // namespace sg::kernels::detail
