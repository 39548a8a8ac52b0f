#pragma once
// Kernels and launch sequences of the causal conv1d + SiLU (kernels/causal_conv1d.h), written over a
// launch policy so the CPU emulator of the tests runs the same code as the launchers (detail::CudaLaunch).
#include <algorithm>

#include "core/error.h"
#include "core/strings.h"
#include "kernels/causal_conv1d.h"
#include "kernels/common.cuh"
#include "kernels/launch_checks.h"
#include "kernels/partial_sums.cuh"
#include "kernels/silu.cuh"

namespace sg::kernels::conv1d {
SG_EMULATED_NAMESPACE_BEGIN

using detail::kBf16PerVec;
using detail::load_bf16;
using detail::silu;
using detail::silu_grad;
using detail::store_bf16;

inline constexpr int W = static_cast<int>(kCausalConv1dWidth);
inline constexpr int kForwardThreads = 256;
inline constexpr int64_t kForwardTile = 32;  // tokens per forward thread (3 halo tokens re-read per tile)
inline constexpr int64_t kMaxBlocks = 1 << 16;
// Backward: block = 32 channel vectors x 8 token slots (thread t: vector t % 32, slot t / 32); a slot walks
// tiles of kBackwardTile tokens; at most kMaxSlots slots in all.
inline constexpr int kVecsPerBlock = 32, kSlotsPerBlock = 8;
inline constexpr int64_t kBackwardTile = 64;
inline constexpr int64_t kMaxSlots = 256;

SG_HOST_DEVICE int64_t forward_blocks(int64_t B, int64_t S, int64_t C, int vec) {
  const int64_t work = B * detail::ceil_div(S, kForwardTile) * (C / vec);
  const int64_t blocks = detail::ceil_div(work, kForwardThreads);
  return blocks < 1 ? 1 : (blocks > kMaxBlocks ? kMaxBlocks : blocks);
}

SG_HOST_DEVICE int64_t backward_partials(int64_t B, int64_t S) {
  const int64_t items = B * detail::ceil_div(S, kBackwardTile);
  const int64_t slots = items < kMaxSlots ? items : kMaxSlots;
  return detail::ceil_div(slots, kSlotsPerBlock);
}

// weight [C, 4] for channels c..c+VEC-1 as wt[k][v].
template <int VEC>
SG_DEVICE void load_conv_weights(const bf16* weight, int64_t c, float (&wt)[W][VEC]) {
  if constexpr (VEC == kBf16PerVec) {
SG_UNROLL
    for (int q = 0; q < W; ++q) {
      float tmp[kBf16PerVec];
      load_bf16<kBf16PerVec>(weight + c * W + q * kBf16PerVec, tmp);
SG_UNROLL
      for (int i = 0; i < kBf16PerVec; ++i) wt[i % W][q * (kBf16PerVec / W) + i / W] = tmp[i];
    }
  } else {
SG_UNROLL
    for (int k = 0; k < W; ++k) wt[k][0] = __bfloat162float(weight[c * W + k]);
  }
}

// bias + sum_k wt[k] x(t - 3 + k), in the CPU twin's order; win = x(t-3), x(t-2), x(t-1); cur = x(t).
template <int VEC>
SG_DEVICE float pre_activation(const float (&wt)[W][VEC], const float (&bias)[VEC], const float (&win)[W - 1][VEC],
                               const float (&cur)[VEC], int v) {
  float acc = bias[v];
SG_UNROLL
  for (int k = 0; k < W - 1; ++k) acc += wt[k][v] * win[k][v];
  return acc + wt[W - 1][v] * cur[v];
}

template <int VEC>
SG_DEVICE void load_or_zero(const bf16* row_or_null, float (&dst)[VEC]) {
  if (row_or_null != nullptr) {
    load_bf16<VEC>(row_or_null, dst);
  } else {
SG_UNROLL
    for (int v = 0; v < VEC; ++v) dst[v] = 0.0f;
  }
}

template <int VEC>
SG_DEVICE void shift_window(float (&win)[W - 1][VEC], const float (&cur)[VEC]) {
SG_UNROLL
  for (int k = 0; k < W - 2; ++k)
SG_UNROLL
    for (int v = 0; v < VEC; ++v) win[k][v] = win[k + 1][v];
SG_UNROLL
  for (int v = 0; v < VEC; ++v) win[W - 2][v] = cur[v];
}

// One thread per (batch, token tile, channel vector), channel vectors fastest (coalesced rows); grid-stride.
template <int VEC>
SG_KERNEL(kForwardThreads) conv_forward_kernel(CausalConv1dForwardParams p) {
  const int64_t nvec = p.C / VEC;
  const int64_t tiles = detail::ceil_div(p.S, kForwardTile);
  const int64_t total = p.B * tiles * nvec;
  const int64_t stride = forward_blocks(p.B, p.S, p.C, VEC) * kForwardThreads;
  for (int64_t idx = static_cast<int64_t>(detail::block_index_x()) * kForwardThreads + detail::thread_index();
       idx < total; idx += stride) {
    const int64_t c = (idx % nvec) * VEC;
    const int64_t item = idx / nvec;
    const int64_t b = item / tiles;
    const int64_t t0 = (item % tiles) * kForwardTile;
    const int64_t t1 = std::min(t0 + kForwardTile, p.S);
    const bf16* in_b = p.in + b * p.S * p.in_row_stride + c;
    float wt[W][VEC], bias[VEC], win[W - 1][VEC];
    load_conv_weights<VEC>(p.weight, c, wt);
    load_bf16<VEC>(p.bias + c, bias);
SG_UNROLL
    for (int k = 0; k < W - 1; ++k) {
      const int64_t s = t0 - (W - 1) + k;
      load_or_zero<VEC>(s >= 0 ? in_b + s * p.in_row_stride : nullptr, win[k]);
    }
    for (int64_t t = t0; t < t1; ++t) {
      float cur[VEC], out[VEC];
      load_bf16<VEC>(in_b + t * p.in_row_stride, cur);
SG_UNROLL
      for (int v = 0; v < VEC; ++v) out[v] = silu(pre_activation<VEC>(wt, bias, win, cur, v));
      store_bf16<VEC>(p.out + (b * p.S + t) * p.C + c, out);
      shift_window<VEC>(win, cur);
    }
  }
}

// Slot (block_y * 8 + t / 32) walks work items (batch, tile) slot, slot + num_slots, ...; for each tile
// [t0, t1) it streams s = t0 .. t1 + 2: dpre(s) (zero past the sequence end) from the recomputed
// pre-activation, din(s - 3) = sum_k w[k] dpre(s - k) once s - 3 >= t0, and for s < t1 the dweight/dbias
// contributions. The block's 8 slots are then added in order (shared memory) into partial row block_y.
template <int VEC>
SG_KERNEL(kVecsPerBlock * kSlotsPerBlock) conv_backward_kernel(CausalConv1dBackwardParams p) {
  float(*slot_sums)[kVecsPerBlock * VEC] =
      reinterpret_cast<float(*)[kVecsPerBlock * VEC]>(detail::dynamic_smem());  // [kSlotsPerBlock][...]
  const int tx = detail::thread_index() % kVecsPerBlock, ty = detail::thread_index() / kVecsPerBlock;
  const int64_t nvec = p.C / VEC;
  const int64_t cv = static_cast<int64_t>(detail::block_index_x()) * kVecsPerBlock + tx;
  const bool active = cv < nvec;
  const int64_t c = cv * VEC;
  const int64_t tiles = detail::ceil_div(p.S, kBackwardTile);
  const int64_t items = p.B * tiles;
  const int64_t num_slots = backward_partials(p.B, p.S) * kSlotsPerBlock;
  float grad[W + 1][VEC];  // grad[k]: dweight[:, k]; grad[W]: dbias
SG_UNROLL
  for (int k = 0; k <= W; ++k)
SG_UNROLL
    for (int v = 0; v < VEC; ++v) grad[k][v] = 0.0f;
  if (active) {
    float wt[W][VEC], bias[VEC];
    load_conv_weights<VEC>(p.weight, c, wt);
    load_bf16<VEC>(p.bias + c, bias);
    for (int64_t item = static_cast<int64_t>(detail::block_index_y()) * kSlotsPerBlock + ty; item < items;
         item += num_slots) {
      const int64_t b = item / tiles;
      const int64_t t0 = (item % tiles) * kBackwardTile;
      const int64_t t1 = std::min(t0 + kBackwardTile, p.S);
      const bf16* in_b = p.in + b * p.S * p.in_row_stride + c;
      float win[W - 1][VEC], dp[W - 1][VEC];  // x(s-3..s-1); dpre(s-3..s-1)
SG_UNROLL
      for (int k = 0; k < W - 1; ++k) {
        const int64_t s = t0 - (W - 1) + k;
        load_or_zero<VEC>(s >= 0 ? in_b + s * p.in_row_stride : nullptr, win[k]);
SG_UNROLL
        for (int v = 0; v < VEC; ++v) dp[k][v] = 0.0f;
      }
      for (int64_t s = t0; s < t1 + (W - 1); ++s) {
        float dps[VEC];
        if (s < p.S) {
          float cur[VEC], g[VEC];
          load_bf16<VEC>(in_b + s * p.in_row_stride, cur);
          load_bf16<VEC>(p.dout + (b * p.S + s) * p.C + c, g);
SG_UNROLL
          for (int v = 0; v < VEC; ++v) dps[v] = g[v] * silu_grad(pre_activation<VEC>(wt, bias, win, cur, v));
          if (s < t1) {
SG_UNROLL
            for (int v = 0; v < VEC; ++v) {
SG_UNROLL
              for (int k = 0; k < W - 1; ++k) grad[k][v] += dps[v] * win[k][v];
              grad[W - 1][v] += dps[v] * cur[v];
              grad[W][v] += dps[v];
            }
          }
          shift_window<VEC>(win, cur);
        } else {
SG_UNROLL
          for (int v = 0; v < VEC; ++v) dps[v] = 0.0f;
        }
        if (s - (W - 1) >= t0) {
          // din(t) = w3 dpre(t) + w2 dpre(t+1) + w1 dpre(t+2) + w0 dpre(t+3), t = s - 3 (the twin's order).
          float dx[VEC];
SG_UNROLL
          for (int v = 0; v < VEC; ++v) {
            float acc = 0.0f;
SG_UNROLL
            for (int k = 0; k < W - 1; ++k) acc += wt[W - 1 - k][v] * dp[k][v];
            dx[v] = acc + wt[0][v] * dps[v];
          }
          store_bf16<VEC>(p.din + (b * p.S + s - (W - 1)) * p.din_row_stride + c, dx);
        }
        shift_window<VEC>(dp, dps);
      }
    }
  }
  // Each field of grad summed over the block's 8 slots in order.
  float* row = p.scratch + static_cast<int64_t>(detail::block_index_y()) * (W + 1) * p.C;
SG_UNROLL
  for (int f = 0; f <= W; ++f) {
    detail::block_sync();  // the previous field's readers are done
SG_UNROLL
    for (int v = 0; v < VEC; ++v) slot_sums[ty][tx * VEC + v] = grad[f][v];
    detail::block_sync();
    if (ty == 0 && active) {
SG_UNROLL
      for (int v = 0; v < VEC; ++v) {
        float total = 0.0f;
SG_UNROLL
        for (int y = 0; y < kSlotsPerBlock; ++y) total += slot_sums[y][tx * VEC + v];
        if (f < W) {
          row[(c + v) * W + f] = total;
        } else {
          row[W * p.C + c + v] = total;
        }
      }
    }
  }
}

inline void check_shape(const char* op, int64_t B, int64_t S, int64_t C) {
  SG_CHECK(B >= 0 && S >= 0 && C > 0,
           strprintf("%s: bad shape B=%lld S=%lld C=%lld (B, S >= 0, C > 0)", op, static_cast<long long>(B),
                     static_cast<long long>(S), static_cast<long long>(C)));
}

// Checks the parameters (row strides resolved: 0 = packed) and runs the forward kernel.
template <class Launch>
void run_forward(const Launch& launch, CausalConv1dForwardParams p) {
  const char* op = "causal_conv1d_silu_forward";
  check_shape(op, p.B, p.S, p.C);
  p.in_row_stride = detail::resolve_row_stride(op, "in_row_stride", p.in_row_stride, p.C);
  SG_CHECK(p.out && p.in && p.weight && p.bias, strprintf("%s: null pointer in params", op));
  if (p.B * p.S == 0) return;
  const bool vec = detail::bf16_vector_path_ok(p.C, {p.in_row_stride}, {p.out, p.in, p.weight, p.bias});
  const dim3 grid(static_cast<unsigned>(forward_blocks(p.B, p.S, p.C, vec ? kBf16PerVec : 1)));
  if (vec) {
    launch("conv_forward_kernel", conv_forward_kernel<kBf16PerVec>, grid, kForwardThreads, 0, p);
  } else {
    launch("conv_forward_kernel", conv_forward_kernel<1>, grid, kForwardThreads, 0, p);
  }
}

// Checks the parameters and runs the backward kernel, then the fixed-order sum of its partial rows.
template <class Launch>
void run_backward(const Launch& launch, CausalConv1dBackwardParams p) {
  const char* op = "causal_conv1d_silu_backward";
  check_shape(op, p.B, p.S, p.C);
  p.in_row_stride = detail::resolve_row_stride(op, "in_row_stride", p.in_row_stride, p.C);
  p.din_row_stride = detail::resolve_row_stride(op, "din_row_stride", p.din_row_stride, p.C);
  SG_CHECK(p.din && p.dweight.data && p.dbias.data && p.dout && p.in && p.weight && p.bias,
           strprintf("%s: null pointer in params", op));
  if (p.B * p.S == 0) return;
  const int64_t partials = backward_partials(p.B, p.S);
  detail::check_scratch(op, p.scratch, p.scratch_bytes, static_cast<size_t>(partials * (W + 1) * p.C) * sizeof(float),
                        strprintf("B=%lld S=%lld C=%lld", static_cast<long long>(p.B), static_cast<long long>(p.S),
                                  static_cast<long long>(p.C)),
                        "causal_conv1d_backward_scratch_bytes(B, S, C)");
  const bool vec = detail::bf16_vector_path_ok(p.C, {p.in_row_stride, p.din_row_stride},
                                               {p.din, p.dout, p.in, p.weight, p.bias});
  const int vw = vec ? kBf16PerVec : 1;
  const dim3 grid(static_cast<unsigned>(detail::ceil_div(p.C / vw, kVecsPerBlock)), static_cast<unsigned>(partials));
  const int threads = kVecsPerBlock * kSlotsPerBlock;
  const size_t smem = sizeof(float) * kSlotsPerBlock * kVecsPerBlock * vw;
  if (vec) {
    launch("conv_backward_kernel", conv_backward_kernel<kBf16PerVec>, grid, threads, smem, p);
  } else {
    launch("conv_backward_kernel", conv_backward_kernel<1>, grid, threads, smem, p);
  }
  partial_sums::run_column_sums(launch, p.scratch, partials, {{p.dweight, W * p.C}, {p.dbias, p.C}});
}

SG_EMULATED_NAMESPACE_END
}  // namespace sg::kernels::conv1d
