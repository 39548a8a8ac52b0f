#pragma once
// Internal to kernels/grouped_gemm: the setup launch that turns the device counts/offsets into each
// expert's problem shape and operand pointers, for ONE or SEVERAL grouped GEMMs at once (a MoE layer's
// GEMMs share their counts, so one launch can prepare all of them: kernels::GroupedGemmSetup). Op-agnostic,
// so that it needs no CUTLASS header: the backends (grouped_gemm_cutlass.cuh) describe their workspace
// arrays in a GroupedGemmSetupJob, and check at plan time that CUTLASS lays a problem shape out as the
// three ints (M, N, K) this kernel writes.
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/grouped_gemm.h"

namespace sg::kernels::detail {

// One grouped GEMM's setup (operand mapping per op: grouped_gemm_backend.h).
struct GroupedGemmSetupJob {
  GroupedGemmOp op = GroupedGemmOp::kForward;
  int num_groups = 0;
  int64_t max_rows = 0, N = 0, K = 0;
  const int32_t* counts = nullptr;
  const int32_t* offsets = nullptr;
  const void* a = nullptr;  // bf16 base pointers
  const void* b = nullptr;
  void* d = nullptr;        // bf16 (forward, backward_input) or the main_grad's dtype (backward_weight)
  int64_t d_element_bytes = 2;  // backward_weight: 4 (fp32 dW) or 2 (bf16 dW)
  // The plan's workspace arrays the GEMM reads: [num_groups] (M, N, K) int triples and pointers.
  int* shapes = nullptr;
  const void** ptr_a = nullptr;
  const void** ptr_b = nullptr;
  void** ptr_d = nullptr;
  // backward_weight overwriting: the dW of the empty experts is zeroed (grouped_gemm_zero_fill.cuh) by this
  // many extra blocks (the most that help: one per SM at most); 0 for every other job.
  int zero_fill_blocks = 0;
};

inline constexpr int kMaxGroupedGemmSetupJobs = GroupedGemmSetup::kMaxJobs;
inline constexpr int kGroupedGemmSetupThreads = 256;  // threads of every block of the setup launch

// ONE launch: block j < count writes job j's arrays; the blocks after them zero the empty experts' dW of every
// job that asks for it. The jobs must write disjoint arrays (distinct plans). 1 <= count <= kMaxGroupedGemmSetupJobs.
void launch_grouped_gemm_setup(cudaStream_t stream, const GroupedGemmSetupJob* jobs, int count);

}  // namespace sg::kernels::detail
