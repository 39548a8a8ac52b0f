#pragma once
// Kernels and launch sequences of the Mamba2 conv1d and SSD scan continued from kept state
// (kernels/mamba_decode.h), written over a launch policy so the CPU emulator of the tests runs the same code
// as the launchers (detail::CudaLaunch).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <utility>

#include "core/error.h"
#include "core/strings.h"
#include "kernels/causal_conv1d.cuh"  // the forward's window arithmetic: out is computed as it computes it
#include "kernels/common.cuh"
#include "kernels/launch_checks.h"
#include "kernels/mamba_decode.h"
#include "kernels/shape_limits.h"  // kCausalConv1dWidth, ssd_state_dim_supported
#include "kernels/silu.cuh"

namespace sg::kernels::mamba_decode {
SG_EMULATED_NAMESPACE_BEGIN

inline constexpr int W = static_cast<int>(kCausalConv1dWidth);
inline constexpr int kKept = W - 1;  // inputs a conv state keeps
inline constexpr int kConvThreads = 256;
inline constexpr int kConvRowsAhead = 8;  // rows a conv thread loads before using them (loads in flight)
inline constexpr int64_t kConvMaxBlocks = 1 << 16;
inline constexpr int kLanesPerRow = 4;  // scan threads per head-dim row (consecutive lanes of one warp)
inline constexpr int kScanMaxThreads = static_cast<int>(kSsdDecodeMaxHeadDim) * kLanesPerRow;
inline constexpr int kRows = static_cast<int>(kSsdDecodeRowsPerStage);

// Sequences (slots) of a call: ceil(T / rows_per_slot).
SG_HOST_DEVICE int64_t sequences(int64_t T, int64_t rows_per_slot) {
  return detail::ceil_div(T, rows_per_slot);
}

SG_HOST_DEVICE int64_t conv_blocks(int64_t seqs, int64_t C) {
  const int64_t blocks = detail::ceil_div(seqs * C, kConvThreads);
  return blocks < 1 ? 1 : (blocks > kConvMaxBlocks ? kConvMaxBlocks : blocks);
}

// One thread per (sequence of the call, channel), channels fastest (coalesced rows); grid-stride. The window
// starts as the slot's kept inputs, slides over the slot's rows in order, and is kept again at the end.
SG_KERNEL(kConvThreads) conv_continued_kernel(CausalConv1dContinuedParams p) {
  const int64_t seqs = sequences(p.T, p.rows_per_slot);
  const int64_t total = seqs * p.C;
  const int64_t stride = conv_blocks(seqs, p.C) * kConvThreads;
  for (int64_t idx = static_cast<int64_t>(detail::block_index_x()) * kConvThreads + detail::thread_index(); idx < total;
       idx += stride) {
    const int64_t c = idx % p.C, q = idx / p.C;
    const int64_t t0 = q * p.rows_per_slot, t1 = std::min(t0 + p.rows_per_slot, p.T);
    bf16* state = p.state + ((p.first_slot + q) * p.C + c) * kKept;
    float wt[W][1], bias[1], win[kKept][1];
    conv1d::load_conv_weights<1>(p.weight, c, wt);
    bias[0] = __bfloat162float(p.bias[c]);
    SG_UNROLL
    for (int k = 0; k < kKept; ++k) win[k][0] = __bfloat162float(state[k]);
    for (int64_t t = t0; t < t1; t += kConvRowsAhead) {
      const int64_t n = std::min(static_cast<int64_t>(kConvRowsAhead), t1 - t);
      float cur[kConvRowsAhead][1];
      SG_UNROLL
      for (int j = 0; j < kConvRowsAhead; ++j) {
        if (j < n) cur[j][0] = __bfloat162float(p.in[(t + j) * p.in_row_stride + c]);
      }
      SG_UNROLL
      for (int j = 0; j < kConvRowsAhead; ++j) {
        if (j < n) {
          const float out = detail::silu(conv1d::pre_activation<1>(wt, bias, win, cur[j], 0));
          p.out[(t + j) * p.C + c] = __float2bfloat16_rn(out);
          conv1d::shift_window<1>(win, cur[j]);
        }
      }
    }
    SG_UNROLL
    for (int k = 0; k < kKept; ++k) state[k] = __float2bfloat16_rn(win[k][0]);  // exact: bf16 inputs
  }
}

// Shared memory of a scan block (fp32): x and y [kRows][P], B and C [kRows][N], dt and decay [kRows].
inline size_t scan_smem_bytes(int64_t P, int64_t N) {
  return static_cast<size_t>(2 * kRows * P + 2 * kRows * N + 2 * kRows) * sizeof(float);
}

inline int scan_threads(int64_t P) {
  return static_cast<int>(detail::round_up(P * kLanesPerRow, 32));
}

// Block (slot of the call q, head h) = block_index_x = q * H + h. Thread t holds state[p][j * 4 + l] for
// p = t / 4, l = t % 4, j < N / 4 (interleaved, so the 4 lanes of a row read consecutive B/C words). Per
// stage of up to kRows rows: the rows' x, B, C, dt and exp(dt A) into shared memory; each row in order:
// state = decay state + (dt x[p]) B, the partial sum_j state C over the thread's n, added over the 4 lanes
// (xor 1, then xor 2), + D x[p]; then the stage's y rows are written out coalesced.
template <int N>
SG_KERNEL(kScanMaxThreads)
scan_continued_kernel(SsdScanContinuedParams p) {
  constexpr int kPer = N / kLanesPerRow;
  const int64_t H = p.nheads, P = p.headdim;
  const int64_t block = detail::block_index_x();
  const int64_t h = block % H, q = block / H;
  const int64_t g = h / (H / p.ngroups);
  const int64_t t0 = q * p.rows_per_slot, t1 = std::min(t0 + p.rows_per_slot, p.T);
  const int tid = detail::thread_index(), nthreads = detail::block_threads();
  const int lane = tid % kLanesPerRow;
  const bool active = tid / kLanesPerRow < P;
  const int row = active ? tid / kLanesPerRow : 0;  // threads past P shadow row 0: they join shuffles, barriers
  float* xs = reinterpret_cast<float*>(detail::dynamic_smem());
  float* ys = xs + kRows * P;
  float* bs = ys + kRows * P;
  float* cs = bs + kRows * N;
  float* dts = cs + kRows * N;
  float* decays = dts + kRows;
  float* kept = p.state + ((p.first_slot + q) * H + h) * P * N + row * N + lane;
  float s[kPer];
  SG_UNROLL
  for (int j = 0; j < kPer; ++j) s[j] = active ? kept[j * kLanesPerRow] : 0.0f;
  const float a = p.A[h];
  const float d = p.D != nullptr ? p.D[h] : 0.0f;
  const bf16* xh = p.x + h * P;
  const bf16* bg = p.Bm + g * N;
  const bf16* cg = p.Cm + g * N;
  for (int64_t r0 = t0; r0 < t1; r0 += kRows) {
    const int n = static_cast<int>(std::min(static_cast<int64_t>(kRows), t1 - r0));
    for (int i = tid; i < n * P; i += nthreads) {
      const int64_t r = i / P;
      xs[i] = __bfloat162float(xh[(r0 + r) * p.x_row_stride + (i - r * P)]);
    }
    for (int i = tid; i < n * N; i += nthreads) {
      const int r = i / N, k = i % N;
      bs[i] = __bfloat162float(bg[(r0 + r) * p.bm_row_stride + k]);
      cs[i] = __bfloat162float(cg[(r0 + r) * p.cm_row_stride + k]);
    }
    for (int i = tid; i < n; i += nthreads) {
      const float dt = p.dt[(r0 + i) * H + h];
      dts[i] = dt;
      decays[i] = static_cast<float>(exp(static_cast<double>(dt) * static_cast<double>(a)));  // as the twin
    }
    detail::block_sync();
    for (int r = 0; r < n; ++r) {
      const float xv = xs[r * P + row];
      const float dtx = dts[r] * xv, decay = decays[r];
      const float* br = bs + r * N + lane;
      const float* cr = cs + r * N + lane;
      float acc = 0.0f;
      SG_UNROLL
      for (int j = 0; j < kPer; ++j) {
        s[j] = decay * s[j] + dtx * br[j * kLanesPerRow];
        acc += s[j] * cr[j * kLanesPerRow];
      }
      acc += detail::shfl_xor(acc, 1);
      acc += detail::shfl_xor(acc, 2);
      if (active && lane == 0) ys[r * P + row] = acc + d * xv;
    }
    detail::block_sync();  // ys complete; the next stage's loads wait for this stage's readers
    for (int i = tid; i < n * P; i += nthreads) {
      const int64_t r = i / P;
      p.y[((r0 + r) * H + h) * P + (i - r * P)] = __float2bfloat16_rn(ys[i]);
    }
  }
  if (active) {
    SG_UNROLL
    for (int j = 0; j < kPer; ++j) kept[j * kLanesPerRow] = s[j];
  }
}

inline long long ll(int64_t v) {
  return static_cast<long long>(v);
}

inline void check_pointers(const char* op, std::initializer_list<std::pair<const char*, const void*>> ptrs) {
  for (const auto& [name, ptr] : ptrs) SG_CHECK(ptr != nullptr, strprintf("%s: %s is null", op, name));
}

// The rows -> slots mapping both launchers share.
inline void check_rows(const char* op, int64_t T, int64_t rows_per_slot, int64_t first_slot, int64_t slots) {
  SG_CHECK(T >= 0, strprintf("%s: T = %lld: need T >= 0 rows", op, ll(T)));
  SG_CHECK(rows_per_slot >= 1, strprintf("%s: rows_per_slot = %lld: need >= 1 (a prefill: the prompt's length; a "
                                         "decoding step: 1)",
                                         op, ll(rows_per_slot)));
  SG_CHECK(first_slot >= 0, strprintf("%s: first_slot = %lld: need >= 0", op, ll(first_slot)));
  const int64_t seqs = sequences(T, rows_per_slot);
  SG_CHECK(slots >= 0 && first_slot <= slots - seqs,
           strprintf("%s: first_slot = %lld with T = %lld rows of rows_per_slot = %lld (%lld sequences) runs past "
                     "slots = %lld: need first_slot + ceil(T / rows_per_slot) <= slots",
                     op, ll(first_slot), ll(T), ll(rows_per_slot), ll(seqs), ll(slots)));
}

// Checks the parameters (row stride resolved: 0 = packed) and runs the conv kernel; T == 0 writes nothing.
template <class Launch>
void run_conv(const Launch& launch, CausalConv1dContinuedParams p) {
  const char* op = "causal_conv1d_silu_continued";
  SG_CHECK(p.C > 0, strprintf("%s: C = %lld: need C > 0 channels", op, ll(p.C)));
  check_rows(op, p.T, p.rows_per_slot, p.first_slot, p.slots);
  p.in_row_stride = detail::resolve_row_stride(op, "in_row_stride", p.in_row_stride, p.C);
  check_pointers(op, {{"out", p.out}, {"state", p.state}, {"in", p.in}, {"weight", p.weight}, {"bias", p.bias}});
  if (p.T == 0) return;
  const dim3 grid(static_cast<unsigned>(conv_blocks(sequences(p.T, p.rows_per_slot), p.C)));
  launch("conv_continued_kernel", conv_continued_kernel, grid, kConvThreads, 0, p);
}

// Checks the parameters (row strides resolved) and runs the scan kernel of p.dstate; T == 0 writes nothing.
template <class Launch>
void run_scan(const Launch& launch, SsdScanContinuedParams p) {
  const char* op = "ssd_scan_continued";
  SG_CHECK(p.nheads > 0 && p.ngroups > 0 && p.nheads % p.ngroups == 0,
           strprintf("%s: nheads = %lld, ngroups = %lld: need ngroups > 0 and nheads a positive multiple of it", op,
                     ll(p.nheads), ll(p.ngroups)));
  SG_CHECK(p.headdim >= 1 && p.headdim <= kSsdDecodeMaxHeadDim,
           strprintf("%s: headdim = %lld is not supported: the decoding scan takes 1..%lld", op, ll(p.headdim),
                     ll(kSsdDecodeMaxHeadDim)));
  SG_CHECK(
      ssd_state_dim_supported(p.dstate),
      strprintf("%s: dstate = %lld is not supported: use 16, 32, 64 or 128 (as the training scan)", op, ll(p.dstate)));
  check_rows(op, p.T, p.rows_per_slot, p.first_slot, p.slots);
  const int64_t seqs = sequences(p.T, p.rows_per_slot);
  SG_CHECK(
      seqs <= INT32_MAX / p.nheads,
      strprintf("%s: %lld sequences x nheads = %lld blocks exceed the grid's 2^31 - 1", op, ll(seqs), ll(p.nheads)));
  p.x_row_stride = detail::resolve_row_stride(op, "x_row_stride", p.x_row_stride, p.nheads * p.headdim);
  p.bm_row_stride = detail::resolve_row_stride(op, "bm_row_stride", p.bm_row_stride, p.ngroups * p.dstate);
  p.cm_row_stride = detail::resolve_row_stride(op, "cm_row_stride", p.cm_row_stride, p.ngroups * p.dstate);
  check_pointers(op,
                 {{"y", p.y}, {"state", p.state}, {"x", p.x}, {"dt", p.dt}, {"A", p.A}, {"Bm", p.Bm}, {"Cm", p.Cm}});
  if (p.T == 0) return;
  const dim3 grid(static_cast<unsigned>(seqs * p.nheads));
  const int threads = scan_threads(p.headdim);
  const size_t smem = scan_smem_bytes(p.headdim, p.dstate);
  switch (p.dstate) {
    case 16: launch("scan_continued_kernel", scan_continued_kernel<16>, grid, threads, smem, p); break;
    case 32: launch("scan_continued_kernel", scan_continued_kernel<32>, grid, threads, smem, p); break;
    case 64: launch("scan_continued_kernel", scan_continued_kernel<64>, grid, threads, smem, p); break;
    default: launch("scan_continued_kernel", scan_continued_kernel<128>, grid, threads, smem, p); break;
  }
}

SG_EMULATED_NAMESPACE_END
}  // namespace sg::kernels::mamba_decode
