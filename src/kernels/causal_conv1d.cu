#include "kernels/causal_conv1d.h"

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

using detail::kBf16PerVec;
using detail::load_bf16;
using detail::silu;
using detail::silu_grad;
using detail::store_bf16;

constexpr int W = static_cast<int>(kCausalConv1dWidth);
constexpr int kForwardThreads = 256;
constexpr int64_t kForwardTile = 32;  // tokens per forward thread (3 halo tokens re-read per tile)
constexpr int64_t kMaxBlocks = 1 << 16;
// Backward: block = 32 channel vectors x 8 token slots; a slot walks tiles of kBackwardTile tokens.
constexpr int kVecsPerBlock = 32, kSlotsPerBlock = 8;
constexpr int64_t kBackwardTile = 64;
constexpr int64_t kMaxSlots = 256;

// weight [C, 4] for channels c..c+VEC-1 as wt[k][v].
template <int VEC>
__device__ __forceinline__ void load_conv_weights(const bf16* weight, int64_t c, float (&wt)[W][VEC]) {
  if constexpr (VEC == kBf16PerVec) {
#pragma unroll
    for (int q = 0; q < W; ++q) {
      float tmp[kBf16PerVec];
      load_bf16<kBf16PerVec>(weight + c * W + q * kBf16PerVec, tmp);
#pragma unroll
      for (int i = 0; i < kBf16PerVec; ++i) wt[i % W][q * (kBf16PerVec / W) + i / W] = tmp[i];
    }
  } else {
#pragma unroll
    for (int k = 0; k < W; ++k) wt[k][0] = __bfloat162float(weight[c * W + k]);
  }
}

// bias + sum_k wt[k] x(t - 3 + k), in the CPU twin's order; win = x(t-3), x(t-2), x(t-1); cur = x(t).
template <int VEC>
__device__ __forceinline__ float pre_activation(const float (&wt)[W][VEC], const float (&bias)[VEC],
                                                const float (&win)[W - 1][VEC], const float (&cur)[VEC], int v) {
  float acc = bias[v];
#pragma unroll
  for (int k = 0; k < W - 1; ++k) acc += wt[k][v] * win[k][v];
  return acc + wt[W - 1][v] * cur[v];
}

template <int VEC>
__device__ __forceinline__ void load_or_zero(const bf16* row_or_null, float (&dst)[VEC]) {
  if (row_or_null != nullptr) {
    load_bf16<VEC>(row_or_null, dst);
  } else {
#pragma unroll
    for (int v = 0; v < VEC; ++v) dst[v] = 0.0f;
  }
}

template <int VEC>
__device__ __forceinline__ void shift_window(float (&win)[W - 1][VEC], const float (&cur)[VEC]) {
#pragma unroll
  for (int k = 0; k < W - 2; ++k)
#pragma unroll
    for (int v = 0; v < VEC; ++v) win[k][v] = win[k + 1][v];
#pragma unroll
  for (int v = 0; v < VEC; ++v) win[W - 2][v] = cur[v];
}

// One thread per (batch, token tile, channel vector), channel vectors fastest (coalesced rows).
template <int VEC>
__global__ void __launch_bounds__(kForwardThreads) conv_forward_kernel(CausalConv1dForwardParams p) {
  const int64_t nvec = p.C / VEC;
  const int64_t tiles = detail::ceil_div(p.S, kForwardTile);
  const int64_t total = p.B * tiles * nvec;
  for (int64_t idx = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; idx < total;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t c = (idx % nvec) * VEC;
    const int64_t item = idx / nvec;
    const int64_t b = item / tiles;
    const int64_t t0 = (item % tiles) * kForwardTile;
    const int64_t t1 = min(t0 + kForwardTile, p.S);
    const bf16* in_b = p.in + b * p.S * p.in_stride + c;
    float wt[W][VEC], bias[VEC], win[W - 1][VEC];
    load_conv_weights<VEC>(p.weight, c, wt);
    load_bf16<VEC>(p.bias + c, bias);
#pragma unroll
    for (int k = 0; k < W - 1; ++k) {
      const int64_t s = t0 - (W - 1) + k;
      load_or_zero<VEC>(s >= 0 ? in_b + s * p.in_stride : nullptr, win[k]);
    }
    for (int64_t t = t0; t < t1; ++t) {
      float cur[VEC], out[VEC];
      load_bf16<VEC>(in_b + t * p.in_stride, cur);
#pragma unroll
      for (int v = 0; v < VEC; ++v) out[v] = silu(pre_activation<VEC>(wt, bias, win, cur, v));
      store_bf16<VEC>(p.out + (b * p.S + t) * p.C + c, out);
      shift_window<VEC>(win, cur);
    }
  }
}

// Slot (blockIdx.y * 8 + threadIdx.y) walks work items (batch, tile) slot, slot + num_slots, ...; for each
// tile [t0, t1) it streams s = t0 .. t1 + 2: dpre(s) (zero past the sequence end) from the recomputed
// pre-activation, din(s - 3) = sum_k w[k] dpre(s - k) once s - 3 >= t0, and for s < t1 the dweight/dbias
// contributions. The block's 8 slots are then added in order (shared memory) into partial row blockIdx.y.
template <int VEC>
__global__ void __launch_bounds__(kVecsPerBlock * kSlotsPerBlock)
    conv_backward_kernel(CausalConv1dBackwardParams p) {
  __shared__ float slot_sums[kSlotsPerBlock][kVecsPerBlock * VEC];
  const int64_t nvec = p.C / VEC;
  const int64_t cv = static_cast<int64_t>(blockIdx.x) * kVecsPerBlock + threadIdx.x;
  const bool active = cv < nvec;
  const int64_t c = cv * VEC;
  const int64_t tiles = detail::ceil_div(p.S, kBackwardTile);
  const int64_t items = p.B * tiles;
  const int64_t num_slots = static_cast<int64_t>(gridDim.y) * kSlotsPerBlock;
  float grad[W + 1][VEC];  // grad[k]: dweight[:, k]; grad[W]: dbias
#pragma unroll
  for (int k = 0; k <= W; ++k)
#pragma unroll
    for (int v = 0; v < VEC; ++v) grad[k][v] = 0.0f;
  if (active) {
    float wt[W][VEC], bias[VEC];
    load_conv_weights<VEC>(p.weight, c, wt);
    load_bf16<VEC>(p.bias + c, bias);
    for (int64_t item = static_cast<int64_t>(blockIdx.y) * kSlotsPerBlock + threadIdx.y; item < items;
         item += num_slots) {
      const int64_t b = item / tiles;
      const int64_t t0 = (item % tiles) * kBackwardTile;
      const int64_t t1 = min(t0 + kBackwardTile, p.S);
      const bf16* in_b = p.in + b * p.S * p.in_stride + c;
      float win[W - 1][VEC], dp[W - 1][VEC];  // x(s-3..s-1); dpre(s-3..s-1)
#pragma unroll
      for (int k = 0; k < W - 1; ++k) {
        const int64_t s = t0 - (W - 1) + k;
        load_or_zero<VEC>(s >= 0 ? in_b + s * p.in_stride : nullptr, win[k]);
#pragma unroll
        for (int v = 0; v < VEC; ++v) dp[k][v] = 0.0f;
      }
      for (int64_t s = t0; s < t1 + (W - 1); ++s) {
        float dps[VEC];
        if (s < p.S) {
          float cur[VEC], g[VEC];
          load_bf16<VEC>(in_b + s * p.in_stride, cur);
          load_bf16<VEC>(p.dout + (b * p.S + s) * p.C + c, g);
#pragma unroll
          for (int v = 0; v < VEC; ++v) dps[v] = g[v] * silu_grad(pre_activation<VEC>(wt, bias, win, cur, v));
          if (s < t1) {
#pragma unroll
            for (int v = 0; v < VEC; ++v) {
#pragma unroll
              for (int k = 0; k < W - 1; ++k) grad[k][v] += dps[v] * win[k][v];
              grad[W - 1][v] += dps[v] * cur[v];
              grad[W][v] += dps[v];
            }
          }
          shift_window<VEC>(win, cur);
        } else {
#pragma unroll
          for (int v = 0; v < VEC; ++v) dps[v] = 0.0f;
        }
        if (s - (W - 1) >= t0) {
          // din(t) = w3 dpre(t) + w2 dpre(t+1) + w1 dpre(t+2) + w0 dpre(t+3), t = s - 3 (the twin's order).
          float dx[VEC];
#pragma unroll
          for (int v = 0; v < VEC; ++v) {
            float acc = 0.0f;
#pragma unroll
            for (int k = 0; k < W - 1; ++k) acc += wt[W - 1 - k][v] * dp[k][v];
            dx[v] = acc + wt[0][v] * dps[v];
          }
          store_bf16<VEC>(p.din + (b * p.S + s - (W - 1)) * p.din_stride + c, dx);
        }
        shift_window<VEC>(dp, dps);
      }
    }
  }
  // Each field of grad summed over the block's 8 slots in order.
  float* row = p.scratch + static_cast<int64_t>(blockIdx.y) * (W + 1) * p.C;
#pragma unroll
  for (int f = 0; f <= W; ++f) {
    __syncthreads();  // the previous field's readers are done
#pragma unroll
    for (int v = 0; v < VEC; ++v) slot_sums[threadIdx.y][threadIdx.x * VEC + v] = grad[f][v];
    __syncthreads();
    if (threadIdx.y == 0 && active) {
#pragma unroll
      for (int v = 0; v < VEC; ++v) {
        float total = 0.0f;
#pragma unroll
        for (int y = 0; y < kSlotsPerBlock; ++y) total += slot_sums[y][threadIdx.x * VEC + v];
        if (f < W) {
          row[(c + v) * W + f] = total;
        } else {
          row[W * p.C + c + v] = total;
        }
      }
    }
  }
}

void check_shape(const char* op, int64_t B, int64_t S, int64_t C) {
  SG_CHECK(B >= 0 && S >= 0 && C > 0,
           strprintf("%s: bad shape B=%lld S=%lld C=%lld (B, S >= 0, C > 0)", op, static_cast<long long>(B),
                     static_cast<long long>(S), static_cast<long long>(C)));
}

int64_t num_slots(int64_t B, int64_t S) {
  return std::min<int64_t>(B * detail::ceil_div(S, kBackwardTile), kMaxSlots);
}

}  // namespace

int64_t causal_conv1d_backward_num_partials(int64_t B, int64_t S) {
  return detail::ceil_div(num_slots(B, S), kSlotsPerBlock);
}

size_t causal_conv1d_backward_scratch_bytes(int64_t B, int64_t S, int64_t C) {
  return static_cast<size_t>(causal_conv1d_backward_num_partials(B, S) * (W + 1) * C) * sizeof(float);
}

void causal_conv1d_silu_forward(cudaStream_t stream, const CausalConv1dForwardParams& p) {
  const char* op = "causal_conv1d_silu_forward";
  check_shape(op, p.B, p.S, p.C);
  detail::check_row_stride(op, "in_stride", p.in_stride, p.C);
  SG_CHECK(p.out && p.in && p.weight && p.bias, strprintf("%s: null pointer in params", op));
  if (p.B * p.S == 0) return;
  const bool vec = detail::bf16_vector_path_ok(p.C, {p.in_stride}, {p.out, p.in, p.weight, p.bias});
  const int vw = vec ? kBf16PerVec : 1;
  const int64_t work = p.B * detail::ceil_div(p.S, kForwardTile) * (p.C / vw);
  const auto blocks =
      static_cast<unsigned>(std::clamp<int64_t>(detail::ceil_div(work, kForwardThreads), 1, kMaxBlocks));
  if (vec) {
    conv_forward_kernel<kBf16PerVec><<<blocks, kForwardThreads, 0, stream>>>(p);
  } else {
    conv_forward_kernel<1><<<blocks, kForwardThreads, 0, stream>>>(p);
  }
  SG_CUDA_CHECK_LAUNCH("conv_forward_kernel");
}

void causal_conv1d_silu_backward(cudaStream_t stream, const CausalConv1dBackwardParams& p) {
  const char* op = "causal_conv1d_silu_backward";
  check_shape(op, p.B, p.S, p.C);
  detail::check_row_stride(op, "in_stride", p.in_stride, p.C);
  detail::check_row_stride(op, "din_stride", p.din_stride, p.C);
  SG_CHECK(p.din && p.dweight && p.dbias && p.dout && p.in && p.weight && p.bias,
           strprintf("%s: null pointer in params", op));
  if (p.B * p.S == 0) return;
  const size_t need = causal_conv1d_backward_scratch_bytes(p.B, p.S, p.C);
  detail::check_scratch(op, p.scratch, p.scratch_bytes, need,
                        strprintf("B=%lld S=%lld C=%lld", static_cast<long long>(p.B), static_cast<long long>(p.S),
                                  static_cast<long long>(p.C)),
                        "causal_conv1d_backward_scratch_bytes(B, S, C)");
  const int64_t partials = causal_conv1d_backward_num_partials(p.B, p.S);
  const bool vec =
      detail::bf16_vector_path_ok(p.C, {p.in_stride, p.din_stride}, {p.din, p.dout, p.in, p.weight, p.bias});
  const int vw = vec ? kBf16PerVec : 1;
  const dim3 block(kVecsPerBlock, kSlotsPerBlock);
  const dim3 grid(static_cast<unsigned>(detail::ceil_div(p.C / vw, kVecsPerBlock)), static_cast<unsigned>(partials));
  if (vec) {
    conv_backward_kernel<kBf16PerVec><<<grid, block, 0, stream>>>(p);
  } else {
    conv_backward_kernel<1><<<grid, block, 0, stream>>>(p);
  }
  SG_CUDA_CHECK_LAUNCH("conv_backward_kernel");
  add_partial_column_sums(stream, p.scratch, partials, {{p.dweight, W * p.C}, {p.dbias, p.C}});
}

}  // namespace sg::kernels
