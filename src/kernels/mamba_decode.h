#pragma once
// The Mamba2 mixer's conv1d and SSD scan continued from kept per-sequence state, for generation: a
// prompt's prefill and the one-token decoding step run the same two kernels. CPU twins (they define the
// math): ref::causal_conv1d_silu_forward_continued (reference/causal_conv1d.h) and
// ref::ssd_scan_forward_continued (reference/ssd_scan.h), called once per slot.
//
//   causal_conv1d_silu_continued  out = silu(bias + sum_k weight[k] in(t - 3 + k)), the inputs before the
//                                 call's first row of a slot coming from its state [C, 3] (last 3 inputs,
//                                 oldest first), which is left holding the slot's last 3 inputs
//   ssd_scan_continued            state = exp(dt A) state + dt x B^T; y = state C + D x, per (slot, head),
//                                 from the slot's kept fp32 state [H, P, N], which is left holding the state
//                                 after the slot's last row
//
// Precision: fp32 state and arithmetic (the scan's decay exp(dt A) in fp64, as the twin), bf16 out / y
// rounded once. A sequence fed in pieces (a prefill, then decoding steps) gives the same out, y and state
// bits as the whole sequence in one call: each row's arithmetic does not depend on how rows are grouped.
// Deterministic: no atomics, every sum in a fixed order. Graph-safe: no allocation, no sync.
//
// Work split. Conv: one thread per (slot, channel) walks the slot's rows in order with a 3-input window in
// registers and writes the slot's new state at the end. Scan: one block per (slot, head), 4 threads per
// head-dim row p, each holding dstate / 4 of the row's state in registers; the rows' x, B, C, dt are staged
// in shared memory kSsdDecodeRowsPerStage at a time, y[p] is summed over the 4 threads with a fixed-order
// shuffle, and the rows are walked in order (a prefill is one sequential walk per block).
//
// Supported: conv any C > 0 (row stride 0 = packed, or >= C); scan headdim 1..kSsdDecodeMaxHeadDim (128),
// dstate 16, 32, 64 or 128 (as the training scan), nheads a multiple of ngroups. out / y must not alias
// the inputs. Kernels: mamba_decode.cuh (also run by the CPU emulator of the tests).
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/bf16.h"

namespace sg::kernels {

inline constexpr int64_t kSsdDecodeMaxHeadDim = 128;
inline constexpr int64_t kSsdDecodeRowsPerStage = 16;

// Rows of one decoding call: row t belongs to sequence slot first_slot + t / rows_per_slot; a slot's rows are
// consecutive positions of its sequence (a prompt's prefill: T = P, rows_per_slot = P; a decoding step of B
// sequences: T = B, rows_per_slot = 1, first_slot = 0).
struct CausalConv1dContinuedParams {
  bf16* out = nullptr;           // [T, C] packed, silu(conv) as causal_conv1d_silu_forward computes it
  bf16* state = nullptr;         // [slots, C, 3]: each sequence's last 3 inputs, oldest first; read, then updated
  const bf16* in = nullptr;      // row t at in + t * in_row_stride; C columns read
  const bf16* weight = nullptr;  // [C, 4]
  const bf16* bias = nullptr;    // [C]
  int64_t T = 0, rows_per_slot = 1, first_slot = 0, slots = 0, C = 0;
  int64_t in_row_stride = 0;  // 0 (packed, C) or >= C
};
void causal_conv1d_silu_continued(cudaStream_t stream, const CausalConv1dContinuedParams& p);

struct SsdScanContinuedParams {
  bf16* y = nullptr;          // [T, H, P] packed
  float* state = nullptr;     // [slots, H, P, N] fp32; read, then updated to the state after the slot's last row
  const bf16* x = nullptr;    // row t at x + t * x_row_stride: [H, P]
  const float* dt = nullptr;  // [T, H] packed, already softplus'ed and clamped (kernels/mamba_dt.h)
  const float* A = nullptr;   // [H], negative
  const bf16* Bm = nullptr;   // row t at Bm + t * bm_row_stride: [G, N]
  const bf16* Cm = nullptr;   // row t at Cm + t * cm_row_stride: [G, N]
  const float* D = nullptr;   // [H] or nullptr
  int64_t T = 0, rows_per_slot = 1, first_slot = 0, slots = 0;
  int64_t nheads = 0, headdim = 0, ngroups = 0, dstate = 0;
  int64_t x_row_stride = 0, bm_row_stride = 0, cm_row_stride = 0;  // 0 = packed
};
void ssd_scan_continued(cudaStream_t stream, const SsdScanContinuedParams& p);

}  // namespace sg::kernels
