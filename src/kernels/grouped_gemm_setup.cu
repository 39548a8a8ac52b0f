#include "kernels/grouped_gemm_setup.h"

#include <algorithm>

#include "core/error.h"
#include "kernels/cuda_launch.cuh"
#include "kernels/grouped_gemm_segment.cuh"
#include "kernels/grouped_gemm_zero_fill.cuh"

namespace sg::kernels::detail {
namespace {

constexpr int kSetupThreads = kGroupedGemmSetupThreads;
static_assert(kSetupThreads % 32 == 0, "the zero-fill blocks vote per full warp (grouped_gemm_zero_fill.cuh)");

struct SetupJobs {
  GroupedGemmSetupJob job[kMaxGroupedGemmSetupJobs];
  int count;
};

// Block j < count: job j's expert g segment [offsets[g], offsets[g] + counts[g]) -> its problem shape and
// operand pointers. A malformed segment is clamped (grouped_gemm_segment.cuh): the MoE preprocess never
// writes one, and clamping guarantees that a bad count can never make the GEMM touch memory outside the
// operand buffers. An empty expert gets the shape (0, 0, 0): zero tiles, nothing loaded or stored
// (grouped_gemm_cutlass.cuh says why not (N, K, 0)). Blocks count..: the overwrite zero-fill.
__global__ void __launch_bounds__(kSetupThreads) grouped_gemm_setup_kernel(SetupJobs jobs) {
  if (static_cast<int>(blockIdx.x) >= jobs.count) {
    const int64_t thread = (blockIdx.x - jobs.count) * int64_t{blockDim.x} + threadIdx.x;
    const int64_t threads = (gridDim.x - jobs.count) * int64_t{blockDim.x};
    for (int j = 0; j < jobs.count; ++j) {
      const GroupedGemmSetupJob& s = jobs.job[j];
      if (s.zero_fill_blocks == 0) continue;
      zero_empty_group_weight_grads(s.d, s.counts, s.offsets, s.num_groups, s.max_rows,
                                    s.N * s.K * s.d_element_bytes, thread, threads);
    }
    return;
  }
  const GroupedGemmSetupJob& s = jobs.job[blockIdx.x];
  const auto* a = static_cast<const unsigned char*>(s.a);
  const auto* b = static_cast<const unsigned char*>(s.b);
  auto* d = static_cast<unsigned char*>(s.d);
  constexpr int64_t kBf16 = 2;
  for (int g = threadIdx.x; g < s.num_groups; g += blockDim.x) {
    const GroupSegment segment = clamped_group_segment(s.counts, s.offsets, g, s.max_rows);
    const int64_t row0 = segment.first_row;  // 0 when empty: the (unused) pointers stay inside the buffers
    const int64_t N = s.N, K = s.K, m = segment.rows;
    int shape[3];
    switch (s.op) {
      case GroupedGemmOp::kForward:  // y_g = x_g W_g^T: A = x + o K, B = w + g N K, D = y + o N
        shape[0] = int(m), shape[1] = int(N), shape[2] = int(K);
        s.ptr_a[g] = a + row0 * K * kBf16;
        s.ptr_b[g] = b + g * N * K * kBf16;
        s.ptr_d[g] = d + row0 * N * kBf16;
        break;
      case GroupedGemmOp::kBackwardInput:  // dx_g = dy_g W_g: A = dy + o N, B = w + g N K, D = dx + o K
        shape[0] = int(m), shape[1] = int(K), shape[2] = int(N);
        s.ptr_a[g] = a + row0 * N * kBf16;
        s.ptr_b[g] = b + g * N * K * kBf16;
        s.ptr_d[g] = d + row0 * K * kBf16;
        break;
      case GroupedGemmOp::kBackwardWeight:  // dW_g = dy_g^T x_g: A = dy + o N, B = x + o K, D = dw + g N K
        shape[0] = int(N), shape[1] = int(K), shape[2] = int(m);
        s.ptr_a[g] = a + row0 * N * kBf16;
        s.ptr_b[g] = b + row0 * K * kBf16;
        s.ptr_d[g] = d + g * N * K * s.d_element_bytes;
        break;
    }
    if (m == 0) shape[0] = shape[1] = shape[2] = 0;  // zero tiles: nothing loaded, nothing stored
    s.shapes[3 * g] = shape[0];
    s.shapes[3 * g + 1] = shape[1];
    s.shapes[3 * g + 2] = shape[2];
  }
}

}  // namespace

void launch_grouped_gemm_setup(cudaStream_t stream, const GroupedGemmSetupJob* jobs, int count) {
  SG_CHECK(count >= 1 && count <= kMaxGroupedGemmSetupJobs,
           "grouped GEMM setup: 1 to " + std::to_string(kMaxGroupedGemmSetupJobs) + " jobs per launch, not " +
               std::to_string(count));
  SetupJobs all{};
  int zero_fill_blocks = 0;
  for (int j = 0; j < count; ++j) {
    all.job[j] = jobs[j];
    zero_fill_blocks = std::max(zero_fill_blocks, jobs[j].zero_fill_blocks);
  }
  all.count = count;
  CudaLaunch{stream}("grouped_gemm_setup_kernel", grouped_gemm_setup_kernel, dim3(count + zero_fill_blocks),
                     kSetupThreads, 0, all);
}

}  // namespace sg::kernels::detail
