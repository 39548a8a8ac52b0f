#include "kernels/cross_entropy.h"

#include <cub/block/block_reduce.cuh>

#include <climits>
#include <cmath>
#include <cstdint>

#include "core/error.h"
#include "core/strings.h"
#include "cuda/check.h"

namespace sg::kernels {
namespace {

// Two-read path (V > kRegisterMaxV), 512 threads per row: a 32k..152k vocabulary gives each thread 64..300
// elements, enough to hide latency. The second read (dlogits) hopes for L2.
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

// Register path for V <= kRegisterMaxV: each thread holds kRegisterQuads groups of four logits in
// registers (the row is read from HBM once), the block reduces the max and then the sum of exp(x - max),
// and each thread writes its dlogits from the exps it kept. Group q = i * blockDim.x + threadIdx.x, so
// every load and store of a warp is contiguous. 8 groups x 1024 threads = 32 floats per thread of the
// 64 registers a 1024-thread block allows.
constexpr int kRegisterQuads = 8;
constexpr int kRegisterMaxThreads = 1024;
constexpr int64_t kRegisterMaxV = int64_t{kRegisterMaxThreads} * kRegisterQuads * 4;

struct MaxOp {
  __device__ __forceinline__ float operator()(float a, float b) const { return fmaxf(a, b); }
};
struct SumOp {
  __device__ __forceinline__ float operator()(float a, float b) const { return a + b; }
};

// Block-wide reduction for a runtime block size (a multiple of 32) in a fixed order: a butterfly in each
// warp (both operands of every step are the same on the two lanes, so all lanes agree bitwise), then warp
// 0 over the warps' results in lane order. Every thread returns the result.
template <class Op>
__device__ __forceinline__ float block_all_reduce(float v, float identity, Op op, float* warp_scratch,
                                                  float* result) {
  for (int offset = 16; offset > 0; offset >>= 1) v = op(v, __shfl_xor_sync(0xffffffffu, v, offset));
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) warp_scratch[warp] = v;
  __syncthreads();
  if (warp == 0) {
    float w = lane < static_cast<int>(blockDim.x / 32) ? warp_scratch[lane] : identity;
    for (int offset = 16; offset > 0; offset >>= 1) w = op(w, __shfl_xor_sync(0xffffffffu, w, offset));
    if (lane == 0) *result = w;
  }
  __syncthreads();
  return *result;
}

template <class LogitT>
__global__ void __launch_bounds__(kRegisterMaxThreads)
    cross_entropy_row_in_registers_kernel(const LogitT* __restrict__ logits, const int32_t* __restrict__ targets,
                                          const float* __restrict__ loss_mask, bf16* __restrict__ dlogits,
                                          float* __restrict__ row_loss, int V, int64_t logits_stride,
                                          int64_t dlogits_stride, const float* __restrict__ token_count,
                                          float loss_scale, bool vectorized) {
  __shared__ float warp_scratch[2][32];
  __shared__ float row_max_shared, row_sum_shared;
  const int64_t row = blockIdx.x;
  const LogitT* x = logits + row * logits_stride;

  // Columns past V hold -inf: they add nothing to the max or the sum and are never stored.
  float e[kRegisterQuads][4];
#pragma unroll
  for (int i = 0; i < kRegisterQuads; ++i) {
    const int j = (i * static_cast<int>(blockDim.x) + static_cast<int>(threadIdx.x)) * 4;
    if (vectorized && j + 3 < V) {
      const float4 q = load_logits4(x, j);
      e[i][0] = q.x, e[i][1] = q.y, e[i][2] = q.z, e[i][3] = q.w;
    } else {
#pragma unroll
      for (int k = 0; k < 4; ++k) e[i][k] = j + k < V ? load_logit(x, j + k) : -INFINITY;
    }
  }
  const float mask = loss_mask[row];
  const bool active = mask != 0.0f;
  const int32_t target = active ? targets[row] : -1;
  const bool target_ok = target >= 0 && target < V;

  float thread_max = -INFINITY;  // fmaxf skips NaN; a NaN logit poisons the sum below instead
#pragma unroll
  for (int i = 0; i < kRegisterQuads; ++i)
#pragma unroll
    for (int k = 0; k < 4; ++k) thread_max = fmaxf(thread_max, e[i][k]);
  const float row_max = block_all_reduce(thread_max, -INFINITY, MaxOp(), warp_scratch[0], &row_max_shared);

  // The exps replace the logits in registers; -inf logits (also the columns past V) contribute 0 even
  // when row_max is -inf.
  float thread_sum = 0.0f;
#pragma unroll
  for (int i = 0; i < kRegisterQuads; ++i) {
#pragma unroll
    for (int k = 0; k < 4; ++k) e[i][k] = e[i][k] == -INFINITY ? 0.0f : expf(e[i][k] - row_max);
    thread_sum += (e[i][0] + e[i][1]) + (e[i][2] + e[i][3]);
  }
  const float row_sum = block_all_reduce(thread_sum, 0.0f, SumOp(), warp_scratch[1], &row_sum_shared);

  if (threadIdx.x == 0) {
    float loss = 0.0f;
    if (active) loss = target_ok ? mask * (logf(row_sum) + row_max - load_logit(x, target)) : NAN;
    row_loss[row] = loss;
  }

  const int onehot_col = (active && target_ok) ? target : -1;
  const float row_scale = (loss_scale / fmaxf(*token_count, 1.0f)) * mask;
  const float inv_sum = 1.0f / row_sum;
  bf16* d = dlogits + row * dlogits_stride;
#pragma unroll
  for (int i = 0; i < kRegisterQuads; ++i) {
    const int j = (i * static_cast<int>(blockDim.x) + static_cast<int>(threadIdx.x)) * 4;
    float g[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) g[k] = row_scale * (e[i][k] * inv_sum - (j + k == onehot_col ? 1.0f : 0.0f));
    if (vectorized && j + 3 < V) {
      const __nv_bfloat162 lo = __floats2bfloat162_rn(g[0], g[1]);
      const __nv_bfloat162 hi = __floats2bfloat162_rn(g[2], g[3]);
      *reinterpret_cast<uint2*>(d + j) =
          make_uint2(*reinterpret_cast<const uint32_t*>(&lo), *reinterpret_cast<const uint32_t*>(&hi));
    } else {
#pragma unroll
      for (int k = 0; k < 4; ++k)
        if (j + k < V) d[j + k] = __float2bfloat16(g[k]);
    }
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
                       float loss_scale, float* __restrict__ loss_accumulator) {
  using BlockReduce = cub::BlockReduce<double, kReduceThreads>;
  __shared__ typename BlockReduce::TempStorage reduce_storage;
  double local = 0.0;
  for (int64_t i = threadIdx.x; i < T; i += kReduceThreads) local += row_loss[i];
  const double total = BlockReduce(reduce_storage).Sum(local);
  if (threadIdx.x == 0) {
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
  if (p.V <= kRegisterMaxV) {
    // The fewest warps that hold the row in kRegisterQuads groups of four per thread.
    const int64_t quads = (p.V + 3) / 4;
    const int64_t warps = (quads + 32 * kRegisterQuads - 1) / (32 * kRegisterQuads);
    const unsigned threads = static_cast<unsigned>(warps * 32);
    const int V = static_cast<int>(p.V);
    if (p.logits_dtype == LogitsDtype::fp32) {
      cross_entropy_row_in_registers_kernel<float><<<grid, threads, 0, stream>>>(
          static_cast<const float*>(p.logits), p.targets, p.loss_mask, p.dlogits, p.row_loss, V, logits_stride,
          dlogits_stride, p.token_count, p.loss_scale, vectorized);
    } else {
      cross_entropy_row_in_registers_kernel<bf16><<<grid, threads, 0, stream>>>(
          static_cast<const bf16*>(p.logits), p.targets, p.loss_mask, p.dlogits, p.row_loss, V, logits_stride,
          dlogits_stride, p.token_count, p.loss_scale, vectorized);
    }
    SG_CUDA_CHECK_LAUNCH("cross_entropy_row_in_registers_kernel");
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
  SG_CHECK(p.row_loss && p.token_count && p.loss_accumulator,
           "cross_entropy_loss_reduce: row_loss, token_count and loss_accumulator must be device pointers");
  SG_CHECK(p.T >= 0, strprintf("cross_entropy_loss_reduce: T=%lld must be >= 0", (long long)p.T));
  loss_reduce_kernel<<<1, kReduceThreads, 0, stream>>>(p.row_loss, p.T, p.token_count, p.loss_scale,
                                                       p.loss_accumulator);
  SG_CUDA_CHECK_LAUNCH("loss_reduce_kernel");
}

}  // namespace sg::kernels
