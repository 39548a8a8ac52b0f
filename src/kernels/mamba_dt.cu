#include "kernels/mamba_dt.h"

#include <algorithm>

#include "core/error.h"
#include "core/strings.h"
#include "cuda/check.h"
#include "kernels/common.cuh"
#include "kernels/launch_checks.h"
#include "kernels/partial_sums.h"
#include "kernels/silu.cuh"

namespace sg::kernels {
namespace {

constexpr int kThreads = 256;
constexpr int64_t kMaxBlocks = 1 << 16;
// Backward: block = 32 heads x 8 token slots; at most kMaxSlots slots.
constexpr int kHeadsPerBlock = 32, kSlotsPerBlock = 8;
constexpr int64_t kMaxSlots = 1024;

// mamba_ssm's softplus: identity above 20.
__device__ __forceinline__ float softplus(float x) { return x <= 20.0f ? log1pf(expf(x)) : x; }
__device__ __forceinline__ float softplus_grad(float x) { return x <= 20.0f ? detail::sigmoid(x) : 1.0f; }

__global__ void __launch_bounds__(kThreads) dt_forward_kernel(MambaDtForwardParams p) {
  const int64_t total = p.T * p.H;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t t = i / p.H, h = i - t * p.H;
    const float sp = softplus(__bfloat162float(p.dt_raw[t * p.raw_stride + h]) + p.dt_bias[h]);
    p.dt[i] = fminf(fmaxf(sp, p.dt_min), p.dt_max);
  }
}

__global__ void __launch_bounds__(kHeadsPerBlock * kSlotsPerBlock)
    dt_backward_kernel(MambaDtBackwardParams p) {
  __shared__ float slot_sums[kSlotsPerBlock][kHeadsPerBlock];
  const int64_t h = static_cast<int64_t>(blockIdx.x) * kHeadsPerBlock + threadIdx.x;
  const int64_t num_slots = static_cast<int64_t>(gridDim.y) * kSlotsPerBlock;
  float acc = 0.0f;
  if (h < p.H) {
    const float bias = p.dt_bias[h];
    for (int64_t t = static_cast<int64_t>(blockIdx.y) * kSlotsPerBlock + threadIdx.y; t < p.T; t += num_slots) {
      const float pre = __bfloat162float(p.dt_raw[t * p.raw_stride + h]) + bias;
      const float sp = softplus(pre);
      const bool clipped = sp < p.dt_min || sp > p.dt_max;
      const float d = clipped ? 0.0f : p.ddt[t * p.H + h] * softplus_grad(pre);
      p.ddt_raw[t * p.draw_stride + h] = __float2bfloat16_rn(d);
      acc += d;
    }
  }
  slot_sums[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && h < p.H) {
    float total = 0.0f;
#pragma unroll
    for (int y = 0; y < kSlotsPerBlock; ++y) total += slot_sums[y][threadIdx.x];
    p.scratch[static_cast<int64_t>(blockIdx.y) * p.H + h] = total;
  }
}

__global__ void a_forward_kernel(MambaAForwardParams p) {
  const int64_t h = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (h < p.H) p.A[h] = -expf(p.A_log[h]);
}

__global__ void a_backward_kernel(MambaABackwardParams p) {
  const int64_t h = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (h < p.H) p.dA_log[h] += p.dA[h] * -expf(p.A_log[h]);
}

void check_shape(const char* op, int64_t T, int64_t H) {
  SG_CHECK(T >= 0 && H > 0, strprintf("%s: bad shape T=%lld H=%lld (T >= 0, H > 0)", op, static_cast<long long>(T),
                                      static_cast<long long>(H)));
}

void check_limit(const char* op, float dt_min, float dt_max) {
  SG_CHECK(dt_min <= dt_max, strprintf("%s: dt_limit = (%g, %g): need dt_limit[0] <= dt_limit[1]", op,
                                       static_cast<double>(dt_min), static_cast<double>(dt_max)));
}

unsigned blocks_for(int64_t n) {
  return static_cast<unsigned>(std::clamp<int64_t>(detail::ceil_div(n, kThreads), 1, kMaxBlocks));
}

}  // namespace

int64_t mamba_dt_backward_num_partials(int64_t T) {
  return detail::ceil_div(std::min<int64_t>(T, kMaxSlots), kSlotsPerBlock);
}

size_t mamba_dt_backward_scratch_bytes(int64_t T, int64_t H) {
  return static_cast<size_t>(mamba_dt_backward_num_partials(T) * H) * sizeof(float);
}

void mamba_dt_forward(cudaStream_t stream, const MambaDtForwardParams& p) {
  const char* op = "mamba_dt_forward";
  check_shape(op, p.T, p.H);
  detail::check_row_stride(op, "raw_stride", p.raw_stride, p.H);
  check_limit(op, p.dt_min, p.dt_max);
  SG_CHECK(p.dt && p.dt_raw && p.dt_bias, strprintf("%s: null pointer in params", op));
  if (p.T == 0) return;
  dt_forward_kernel<<<blocks_for(p.T * p.H), kThreads, 0, stream>>>(p);
  SG_CUDA_CHECK_LAUNCH("dt_forward_kernel");
}

void mamba_dt_backward(cudaStream_t stream, const MambaDtBackwardParams& p) {
  const char* op = "mamba_dt_backward";
  check_shape(op, p.T, p.H);
  detail::check_row_stride(op, "raw_stride", p.raw_stride, p.H);
  detail::check_row_stride(op, "draw_stride", p.draw_stride, p.H);
  check_limit(op, p.dt_min, p.dt_max);
  SG_CHECK(p.ddt_raw && p.ddt_bias && p.ddt && p.dt_raw && p.dt_bias, strprintf("%s: null pointer in params", op));
  if (p.T == 0) return;
  const size_t need = mamba_dt_backward_scratch_bytes(p.T, p.H);
  detail::check_scratch(op, p.scratch, p.scratch_bytes, need,
                        strprintf("T=%lld H=%lld", static_cast<long long>(p.T), static_cast<long long>(p.H)),
                        "mamba_dt_backward_scratch_bytes(T, H)");
  const int64_t partials = mamba_dt_backward_num_partials(p.T);
  const dim3 block(kHeadsPerBlock, kSlotsPerBlock);
  const dim3 grid(static_cast<unsigned>(detail::ceil_div(p.H, kHeadsPerBlock)), static_cast<unsigned>(partials));
  dt_backward_kernel<<<grid, block, 0, stream>>>(p);
  SG_CUDA_CHECK_LAUNCH("dt_backward_kernel");
  add_partial_column_sums(stream, p.scratch, partials, {{p.ddt_bias, p.H}});
}

void mamba_a_forward(cudaStream_t stream, const MambaAForwardParams& p) {
  SG_CHECK(p.H > 0 && p.A && p.A_log, "mamba_a_forward: need H > 0 and non-null A, A_log");
  a_forward_kernel<<<blocks_for(p.H), kThreads, 0, stream>>>(p);
  SG_CUDA_CHECK_LAUNCH("a_forward_kernel");
}

void mamba_a_backward(cudaStream_t stream, const MambaABackwardParams& p) {
  SG_CHECK(p.H > 0 && p.dA_log && p.dA && p.A_log, "mamba_a_backward: need H > 0 and non-null dA_log, dA, A_log");
  a_backward_kernel<<<blocks_for(p.H), kThreads, 0, stream>>>(p);
  SG_CUDA_CHECK_LAUNCH("a_backward_kernel");
}

}  // namespace sg::kernels
