#pragma once
// Internal to kernels/grouped_gemm: the interface between the plan classes (grouped_gemm.cpp, plain C++)
// and the CUTLASS instantiations (grouped_gemm_*_sm90a.cu, one per op, built for sm_90a only), so that
// only those files see CUTLASS headers.
//
// Operands (GroupedGemmOperands a, b, d) of each op, and the GEMM CUTLASS computes per expert g with
// m = counts[g] rows starting at row o = offsets[g] (CUTLASS: D[M, N] = A[M, K] B[N, K]^T, fp32 accumulate):
//   forward          a = x, b = w, d = y     M = m, N = N, K = K    A = x + o K   (row-major, K-major)
//                                                                   B = w + g N K (row-major [N, K]: K-major)
//                                                                   D = y + o N   (row-major)
//   backward_input   a = dy, b = w, d = dx   M = m, N = K, K = N    A = dy + o N  (K-major)
//                                                                   B = w + g N K (B(k, n) = W[n, k]: N-major)
//                                                                   D = dx + o K  (row-major)
//   backward_weight  a = dy, b = x, d = dw   M = N, N = K, K = m    A = dy + o N  (A(n, r) = dy[r, n]: M-major)
//                                                                   B = x + o K   (B(k, r) = x[r, k]: N-major)
//                                                                   C = D = dw + g N K (fp32 or bf16, beta = 1)
//                                                                   (beta = 0 when the op overwrites)
// Every leading dimension is a plan-time constant (N or K), so the stride arrays are written once.
#include <cuda_runtime.h>

#include <cstddef>
#include <memory>
#include <string>

#include "kernels/grouped_gemm.h"
#include "kernels/grouped_gemm_setup.h"

namespace sg::kernels::detail {

class GroupedGemmBackend {
 public:
  virtual ~GroupedGemmBackend() = default;
  // Device bytes of the workspace: problem shapes, pointer and stride arrays, CUTLASS's own workspace.
  virtual size_t workspace_bytes() const = 0;
  // Lays the arrays out in `workspace` (kWorkspaceAlignment-aligned), uploads the strides
  // (synchronous), then CUTLASS can_implement + initialize. Throws sg::Error on refusal.
  virtual void initialize(void* workspace) = 0;
  // What the setup launch (grouped_gemm_setup.h) must write into this workspace for `operands`.
  virtual GroupedGemmSetupJob setup_job(const GroupedGemmOperands& operands) const = 0;
  // The grouped GEMM alone, reading the arrays the last setup launch wrote; only launches.
  virtual void run_gemm(cudaStream_t stream, bool accumulate) = 0;
  // Setup launch + grouped GEMM on `stream`.
  void run(cudaStream_t stream, const GroupedGemmOperands& operands) {
    const GroupedGemmSetupJob job = setup_job(operands);
    launch_grouped_gemm_setup(stream, &job, 1);
    run_gemm(stream, operands.accumulate);
  }
  virtual std::string kernel_name() const = 0;
};

// One factory per op and tile, each defined in its own grouped_gemm_<op>[_<tile>]_sm90a.cu. sm_count: the
// persistent grid (CTAs) and the number of per-SM TMA descriptor slots in the workspace.
std::unique_ptr<GroupedGemmBackend> make_grouped_forward_backend(const GroupedGemmDims& dims, int sm_count);
std::unique_ptr<GroupedGemmBackend> make_grouped_backward_input_backend(const GroupedGemmDims& dims, int sm_count);
std::unique_ptr<GroupedGemmBackend> make_grouped_backward_weight_backend(const GroupedGemmDims& dims, int sm_count);
// backward_weight with the 128x96 tile (WeightGradTile::kNarrow).
std::unique_ptr<GroupedGemmBackend> make_grouped_backward_weight_narrow_backend(const GroupedGemmDims& dims,
                                                                                int sm_count);
// backward_weight into a bf16 dW (GroupedGemmDims::weight_grad_dtype), each tile.
std::unique_ptr<GroupedGemmBackend> make_grouped_backward_weight_bf16_backend(const GroupedGemmDims& dims,
                                                                              int sm_count);
std::unique_ptr<GroupedGemmBackend> make_grouped_backward_weight_narrow_bf16_backend(const GroupedGemmDims& dims,
                                                                                     int sm_count);

}  // namespace sg::kernels::detail
