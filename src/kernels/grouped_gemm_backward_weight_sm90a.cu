// The CUTLASS grouped GEMM of GroupedLinearBackwardWeight (kernels/grouped_gemm.h): its one
// instantiation, in its own translation unit so the three ops compile in parallel (built for sm_90a only).
#include "kernels/grouped_gemm_cutlass.cuh"

namespace sg::kernels::detail {

std::unique_ptr<GroupedGemmBackend> make_grouped_backward_weight_backend(const GroupedGemmDims& dims, int sm_count) {
  return std::make_unique<grouped_cutlass::Backend<GroupedGemmOp::kBackwardWeight>>(dims, sm_count);
}

}  // namespace sg::kernels::detail
