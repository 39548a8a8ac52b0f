#include "kernels/cross_entropy.h"

#include <cub/block/block_reduce.cuh>

#include <climits>
#include <cmath>

#include "core/error.h"
#include "core/strings.h"
#include "cuda/check.h"

namespace sg::kernels {
namespace {

// 512 threads per row: a 32k..128k vocabulary gives each thread 64..250 elements, enough to hide latency.
constexpr int kRowThreads = 512;
// One block for the [T]-long token-count and loss reductions (T is at most a few hundred thousand).
constexpr int kReduceThreads = 1024;

__device__ __forceinline__ float load_logit(const float* row, int64_t j) { return row[j]; }
__device__ __forceinline__ float load_logit(const bf16* row, int64_t j) { return __bfloat162float(row[j]); }

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

template <class LogitT>
__global__ void __launch_bounds__(kRowThreads)
    cross_entropy_kernel(const LogitT* __restrict__ logits, const int32_t* __restrict__ targets,
                         const float* __restrict__ loss_mask, bf16* __restrict__ dlogits,
                         float* __restrict__ row_loss, int64_t V, int64_t logits_stride,
                         int64_t dlogits_stride, const float* __restrict__ token_count, float loss_scale) {
  using BlockReduce = cub::BlockReduce<MaxSum, kRowThreads>;
  __shared__ typename BlockReduce::TempStorage reduce_storage;
  __shared__ MaxSum row_stats;

  const int64_t row = blockIdx.x;
  const LogitT* x = logits + row * logits_stride;

  // Pass 1: per-thread online max/sum over a fixed strided subset, then a fixed-order block reduction.
  MaxSum local{-INFINITY, 0.0f};
  for (int64_t j = threadIdx.x; j < V; j += kRowThreads) {
    const float v = load_logit(x, j);
    if (v > local.max) {
      local.sum = local.sum * expf(local.max - v) + 1.0f;
      local.max = v;
    } else {
      local.sum += (v == -INFINITY) ? 0.0f : expf(v - local.max);  // NaN v falls here and poisons sum
    }
  }
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
  for (int64_t j = threadIdx.x; j < V; j += kRowThreads) {
    const float prob = expf(load_logit(x, j) - row_max) * inv_sum;
    const float grad = prob - (j == onehot_col ? 1.0f : 0.0f);
    d[j] = __float2bfloat16(row_scale * grad);
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
  if (p.logits_dtype == LogitsDtype::fp32) {
    cross_entropy_kernel<float><<<grid, kRowThreads, 0, stream>>>(
        static_cast<const float*>(p.logits), p.targets, p.loss_mask, p.dlogits, p.row_loss, p.V, logits_stride,
        dlogits_stride, p.token_count, p.loss_scale);
  } else {
    cross_entropy_kernel<bf16><<<grid, kRowThreads, 0, stream>>>(
        static_cast<const bf16*>(p.logits), p.targets, p.loss_mask, p.dlogits, p.row_loss, p.V, logits_stride,
        dlogits_stride, p.token_count, p.loss_scale);
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
