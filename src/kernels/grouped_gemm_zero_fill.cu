#include "kernels/grouped_gemm_zero_fill.h"

#include <algorithm>

#include "core/error.h"
#include "core/strings.h"
#include "cuda/check.h"
#include "cuda/device.h"
#include "kernels/grouped_gemm_segment.cuh"

namespace sg::kernels::detail {
namespace {

constexpr int kThreads = 256;
constexpr int kBlocksPerSm = 4;

__global__ void __launch_bounds__(kThreads) zero_empty_group_weight_grads_kernel(ZeroEmptyGroupWeightGradsParams p) {
  const int64_t vecs = p.group_elems / 4;
  const int64_t stride = int64_t{gridDim.x} * blockDim.x;
  const float4 zero = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  for (int g = 0; g < p.num_groups; ++g) {
    // Uniform across the grid: every thread reads the same count (an L1 broadcast).
    if (clamped_group_segment(p.counts, p.offsets, g, p.max_total_rows).rows != 0) continue;
    float4* out = reinterpret_cast<float4*>(p.dw + g * p.group_elems);
    for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < vecs; i += stride) out[i] = zero;
  }
}

}  // namespace

void zero_empty_group_weight_grads(cudaStream_t stream, const ZeroEmptyGroupWeightGradsParams& p) {
  SG_CHECK(p.dw != nullptr && reinterpret_cast<uintptr_t>(p.dw) % 16 == 0 && p.counts != nullptr &&
               p.offsets != nullptr && p.num_groups >= 1 && p.max_total_rows >= 1 && p.group_elems >= 4 &&
               p.group_elems % 4 == 0,
           strprintf("grouped GEMM backward_weight zero-fill: dw=%p must be 16-byte aligned, counts/offsets "
                     "non-null, num_groups=%d and max_total_rows=%lld >= 1, group_elems=%lld a multiple of 4",
                     static_cast<const void*>(p.dw), p.num_groups, static_cast<long long>(p.max_total_rows),
                     static_cast<long long>(p.group_elems)));
  // Enough blocks to zero one empty expert at full bandwidth, never more than one expert needs.
  const int64_t needed = (p.group_elems / 4 + kThreads - 1) / kThreads;
  const int blocks = static_cast<int>(std::min<int64_t>(needed, int64_t{kBlocksPerSm} * cuda::device_properties().sm_count));
  zero_empty_group_weight_grads_kernel<<<blocks, kThreads, 0, stream>>>(p);
  SG_CUDA_CHECK_LAUNCH("zero_empty_group_weight_grads_kernel");
}

}  // namespace sg::kernels::detail
