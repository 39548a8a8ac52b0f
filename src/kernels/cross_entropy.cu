#include "kernels/cross_entropy.h"

#include <cub/block/block_reduce.cuh>

#include <climits>
#include <cmath>
#include <cstdint>

#include "core/error.h"
#include "core/strings.h"
#include "cuda/check.h"
#include "kernels/cross_entropy_registers.cuh"
#include "kernels/cuda_launch.cuh"

namespace sg::kernels {
namespace {

// Two-read path (V > cross_entropy_registers::kMaxV; the register path is cross_entropy_registers.cuh),
// 512 threads per row: a 32k..152k vocabulary gives each thread 64..300 elements, enough to hide latency.
// The second read (dlogits) hopes for L2.
constexpr int kRowThreads = 512;
// One block for the [T]-long token-count and loss reductions (T is at most a few hundred thousand).
constexpr int kReduceThreads = 1024;

__device__ __forceinline__ float load_logit(const float* row, int64_t j) { return row[j]; }
__device__ __forceinline__ float load_logit(const bf16* row, int64_t j) { return __bfloat162float(row[j]); }

// Four consecutive logits from j (a multiple of 4) in one access: 16 bytes of fp32 or 8 of bf16.
__device__ __forceinline__ float4 load_logits4(const float* row, int64_t j) {
  return *reinterpret_cast<const float4*>(row + j);
}
__device__ __forceinline__ float4 load_logits4(const bf16* row, int64_t j) {
  const uint2 raw = *reinterpret_cast<const uint2*>(row + j);
  const float2 lo = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&raw.x));
  const float2 hi = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&raw.y));
  return make_float4(lo.x, lo.y, hi.x, hi.y);
}

// Online-softmax state: running max and sum of exp(x - max).
struct MaxSum {
  float max;
  float sum;
};

struct MaxSumCombine {
  __device__ __forceinline__ MaxSum operator()(const MaxSum& a, const MaxSum& b) const {
    const float m = fmaxf(a.max, b.max);
    // Both empty (or all -inf): keep the sums as they are so a NaN sum is not lost.
    if (m == -INFINITY) return {m, a.sum + b.sum};
    return {m, a.sum * expf(a.max - m) + b.sum * expf(b.max - m)};
  }
};

__device__ __forceinline__ void add_logit(MaxSum& s, float v) {
  if (v > s.max) {
    s.sum = s.sum * expf(s.max - v) + 1.0f;
    s.max = v;
  } else {
    s.sum += (v == -INFINITY) ? 0.0f : expf(v - s.max);  // NaN v falls here and poisons sum
  }
}

// Four logits at once: one rescale of the running sum per four elements.
__device__ __forceinline__ void add_logits4(MaxSum& s, float4 v) {
  const float m = fmaxf(s.max, fmaxf(fmaxf(v.x, v.y), fmaxf(v.z, v.w)));  // fmaxf skips NaN ...
  if (m == -INFINITY) {
    if (isnan(v.x) || isnan(v.y) || isnan(v.z) || isnan(v.w)) s.sum = NAN;  // ... so keep it here
    return;
  }
  s.sum = s.sum * expf(s.max - m) + ((expf(v.x - m) + expf(v.y - m)) + (expf(v.z - m) + expf(v.w - m)));
  s.max = m;
}

__device__ __forceinline__ float dlogit(float logit, int64_t j, int64_t onehot_col, float row_max, float inv_sum,
                                        float row_scale) {
  const float prob = expf(logit - row_max) * inv_sum;
  return row_scale * (prob - (j == onehot_col ? 1.0f : 0.0f));
}

// Two-read path, one block per row. With `vectorized` (every row start aligned for four logits, 16 bytes of fp32 or 8 of
// bf16, and for four bf16 dlogits, 8 bytes), the first V/4*4 columns go four at a time (memory-bound: wide accesses keep more bytes in
// flight) and the rest one at a time; otherwise all one at a time. Each thread's columns and the block
// reduction are in a fixed order either way, so the result is deterministic.
template <class LogitT>
__global__ void __launch_bounds__(kRowThreads)
    cross_entropy_kernel(const LogitT* __restrict__ logits, const int32_t* __restrict__ targets,
                         const float* __restrict__ loss_mask, bf16* __restrict__ dlogits,
                         float* __restrict__ row_loss, int64_t V, int64_t logits_stride,
                         int64_t dlogits_stride, const float* __restrict__ token_count, float loss_scale,
                         bool vectorized) {
  using BlockReduce = cub::BlockReduce<MaxSum, kRowThreads>;
  __shared__ typename BlockReduce::TempStorage reduce_storage;
  __shared__ MaxSum row_stats;

  const int64_t row = blockIdx.x;
  const LogitT* x = logits + row * logits_stride;
  const int64_t quads = vectorized ? V / 4 : 0;

  // Pass 1: per-thread online max/sum over a fixed strided subset, then a fixed-order block reduction.
  MaxSum local{-INFINITY, 0.0f};
  for (int64_t q = threadIdx.x; q < quads; q += kRowThreads) add_logits4(local, load_logits4(x, q * 4));
  for (int64_t j = quads * 4 + threadIdx.x; j < V; j += kRowThreads) add_logit(local, load_logit(x, j));
  const MaxSum total = BlockReduce(reduce_storage).Reduce(local, MaxSumCombine());
  if (threadIdx.x == 0) row_stats = total;
  __syncthreads();
  const float row_max = row_stats.max;
  const float row_sum = row_stats.sum;

  const float mask = loss_mask[row];
  const bool active = mask != 0.0f;
  const int32_t target = active ? targets[row] : -1;
  const bool target_ok = target >= 0 && static_cast<int64_t>(target) < V;
  const int64_t onehot_col = (active && target_ok) ? target : -1;

  if (threadIdx.x == 0) {
    float loss = 0.0f;
    if (active) loss = target_ok ? mask * (logf(row_sum) + row_max - load_logit(x, target)) : NAN;
    row_loss[row] = loss;
  }

  // Pass 2: dlogits = scale * mask * (softmax - onehot).
  const float row_scale = (loss_scale / fmaxf(*token_count, 1.0f)) * mask;
  const float inv_sum = 1.0f / row_sum;
  bf16* d = dlogits + row * dlogits_stride;
  for (int64_t q = threadIdx.x; q < quads; q += kRowThreads) {
    const int64_t j = q * 4;
    const float4 v = load_logits4(x, j);
    const __nv_bfloat162 lo = __floats2bfloat162_rn(dlogit(v.x, j, onehot_col, row_max, inv_sum, row_scale),
                                                    dlogit(v.y, j + 1, onehot_col, row_max, inv_sum, row_scale));
    const __nv_bfloat162 hi = __floats2bfloat162_rn(dlogit(v.z, j + 2, onehot_col, row_max, inv_sum, row_scale),
                                                    dlogit(v.w, j + 3, onehot_col, row_max, inv_sum, row_scale));
    *reinterpret_cast<uint2*>(d + j) =
        make_uint2(*reinterpret_cast<const uint32_t*>(&lo), *reinterpret_cast<const uint32_t*>(&hi));
  }
  for (int64_t j = quads * 4 + threadIdx.x; j < V; j += kRowThreads) {
    d[j] = __float2bfloat16(dlogit(load_logit(x, j), j, onehot_col, row_max, inv_sum, row_scale));
  }
}

__global__ void __launch_bounds__(kReduceThreads)
    loss_token_count_kernel(const float* __restrict__ loss_mask, int64_t T, float* __restrict__ token_count) {
  using BlockReduce = cub::BlockReduce<double, kReduceThreads>;
  __shared__ typename BlockReduce::TempStorage reduce_storage;
  double local = 0.0;
  for (int64_t i = threadIdx.x; i < T; i += kReduceThreads) local += loss_mask[i];
  const double total = BlockReduce(reduce_storage).Sum(local);
  if (threadIdx.x == 0) *token_count = static_cast<float>(total);
}

__global__ void __launch_bounds__(kReduceThreads)
    loss_reduce_kernel(const float* __restrict__ row_loss, int64_t T, const float* __restrict__ token_count,
                       float loss_scale, float* __restrict__ loss_accumulator, double* __restrict__ loss_sums) {
  using BlockReduce = cub::BlockReduce<double, kReduceThreads>;
  __shared__ typename BlockReduce::TempStorage reduce_storage;
  double local = 0.0;
  for (int64_t i = threadIdx.x; i < T; i += kReduceThreads) local += row_loss[i];
  const double total = BlockReduce(reduce_storage).Sum(local);
  if (threadIdx.x == 0 && loss_sums != nullptr) {
    loss_sums[0] += total;
    loss_sums[1] += static_cast<double>(*token_count);
  } else if (threadIdx.x == 0) {
    const double mean = total / fmax(static_cast<double>(*token_count), 1.0);
    *loss_accumulator += static_cast<float>(mean * static_cast<double>(loss_scale));
  }
}

}  // namespace

void loss_token_count(cudaStream_t stream, const LossTokenCountParams& p) {
  SG_CHECK(p.loss_mask != nullptr && p.token_count != nullptr,
           "loss_token_count: loss_mask and token_count must be device pointers");
  SG_CHECK(p.T >= 0, strprintf("loss_token_count: T=%lld must be >= 0", (long long)p.T));
  loss_token_count_kernel<<<1, kReduceThreads, 0, stream>>>(p.loss_mask, p.T, p.token_count);
  SG_CUDA_CHECK_LAUNCH("loss_token_count_kernel");
}

void cross_entropy_forward_backward(cudaStream_t stream, const CrossEntropyParams& p) {
  const int64_t logits_stride = p.logits_stride == 0 ? p.V : p.logits_stride;
  const int64_t dlogits_stride = p.dlogits_stride == 0 ? p.V : p.dlogits_stride;
  SG_CHECK(p.V > 0 && p.rows >= 0 && p.rows <= INT_MAX,
           strprintf("cross_entropy: bad shape rows=%lld V=%lld", (long long)p.rows, (long long)p.V));
  SG_CHECK(logits_stride >= p.V && dlogits_stride >= p.V,
           strprintf("cross_entropy: row strides (logits %lld, dlogits %lld) must be >= V=%lld",
                     (long long)logits_stride, (long long)dlogits_stride, (long long)p.V));
  SG_CHECK(p.logits && p.targets && p.loss_mask && p.dlogits && p.row_loss && p.token_count,
           "cross_entropy: logits, targets, loss_mask, dlogits, row_loss and token_count must all be set");
  if (p.rows == 0) return;
  const dim3 grid(static_cast<unsigned>(p.rows));
  const int64_t logit_bytes = p.logits_dtype == LogitsDtype::fp32 ? 4 : 2;
  // Wide accesses need every row start aligned: 4 logits (16 or 8 bytes) and 4 bf16 dlogits (8 bytes).
  const bool vectorized = reinterpret_cast<uintptr_t>(p.logits) % (4 * logit_bytes) == 0 &&
                          logits_stride % 4 == 0 &&
                          reinterpret_cast<uintptr_t>(p.dlogits) % 8 == 0 && dlogits_stride % 4 == 0;
  if (p.V <= cross_entropy_registers::kMaxV) {
    cross_entropy_registers::run(detail::CudaLaunch{stream}, p, logits_stride, dlogits_stride, vectorized);
    return;
  }
  if (p.logits_dtype == LogitsDtype::fp32) {
    cross_entropy_kernel<float><<<grid, kRowThreads, 0, stream>>>(
        static_cast<const float*>(p.logits), p.targets, p.loss_mask, p.dlogits, p.row_loss, p.V, logits_stride,
        dlogits_stride, p.token_count, p.loss_scale, vectorized);
  } else {
    cross_entropy_kernel<bf16><<<grid, kRowThreads, 0, stream>>>(
        static_cast<const bf16*>(p.logits), p.targets, p.loss_mask, p.dlogits, p.row_loss, p.V, logits_stride,
        dlogits_stride, p.token_count, p.loss_scale, vectorized);
  }
  SG_CUDA_CHECK_LAUNCH("cross_entropy_kernel");
}

void cross_entropy_loss_reduce(cudaStream_t stream, const CrossEntropyLossReduceParams& p) {
  SG_CHECK(p.row_loss && p.token_count && (p.loss_accumulator == nullptr) != (p.loss_sums == nullptr),
           "cross_entropy_loss_reduce: row_loss, token_count and exactly one of loss_accumulator and loss_sums must be "
           "device pointers");
  SG_CHECK(p.T >= 0, strprintf("cross_entropy_loss_reduce: T=%lld must be >= 0", (long long)p.T));
  loss_reduce_kernel<<<1, kReduceThreads, 0, stream>>>(p.row_loss, p.T, p.token_count, p.loss_scale, p.loss_accumulator,
                                                       p.loss_sums);
  SG_CUDA_CHECK_LAUNCH("loss_reduce_kernel");
}

}  // namespace sg::kernels
