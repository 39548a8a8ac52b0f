#pragma once
// Internals shared by the SSD scan kernels (ssd_scan_forward.cuh, ssd_scan_backward.cuh): the argument block
// every kernel receives, the workspace layout, tile staging and fixed-order block reductions / scans.
#include <cuda_bf16.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include "kernels/ssd_scan.h"
#include "kernels/warp_mma.cuh"

namespace sg::kernels::ssd {

using detail::block_sync;
using detail::lane_id;
using detail::thread_index;
using detail::warp_id;

inline constexpr int kQ = kSsdChunk;
inline constexpr int kChunkThreads = 128;  // one thread per chunk position in the scans
inline constexpr int kGroupThreads = 256;  // dB/dC kernel: one warp per 16-row block of the chunk
inline constexpr int kPassThreads = 128;   // state passing: 4 consecutive state elements per thread
inline constexpr int kPassElems = kPassThreads * 4;

// Every kernel gets this block by value. Sizes are ints (checked < 2^31 by the launchers); offsets int64.
struct SsdArgs {
  int batch = 0, seqlen = 0, nheads = 0, ngroups = 0, nchunks = 0, heads_per_group = 0, hsplit = 1;
  const bf16* x = nullptr;
  const float* dt = nullptr;
  const float* A = nullptr;
  const bf16* Bm = nullptr;
  const bf16* Cm = nullptr;
  const float* D = nullptr;
  const bf16* dy = nullptr;
  int64_t x_stride = 0, bm_stride = 0, cm_stride = 0, dy_stride = 0;
  bf16* y = nullptr;
  int64_t y_stride = 0;
  bf16* dx = nullptr;
  int64_t dx_stride = 0;
  float* ddt = nullptr;
  float* dA = nullptr;
  float* dD = nullptr;
  bf16* dBm = nullptr;
  bf16* dCm = nullptr;
  int64_t dbm_stride = 0, dcm_stride = 0;
  // Workspace.
  float* cum = nullptr;        // [B, H, C, Q]: inclusive cumsum of dt*A within the chunk (padded: flat)
  float* states32 = nullptr;   // [B, C, H, P, N]: chunk states S_c (forward), local state grads (backward)
  bf16* states16 = nullptr;    // [B, C, H, P, N]: H_c, the state entering chunk c
  bf16* grads16 = nullptr;     // [B, C, H, P, N]: dL/dS_c = dL/dH_{c+1}
  float* chunk_dot = nullptr;  // [B, H, C, P*N / kPassElems]: partial exp(cum_last) <dL/dH_{c+1}, H_c>
  float* dA_part = nullptr;    // [B, C, H]
  float* dD_part = nullptr;    // [B, C, H]
  float* dbc_part = nullptr;   // [2 (dB, dC), hsplit, B, S, G, N] when hsplit > 1

  SG_DEVICE int64_t cum_offset(int b, int h, int c) const {
    return ((static_cast<int64_t>(b) * nheads + h) * nchunks + c) * kQ;
  }
  SG_DEVICE int64_t dt_index(int b, int t, int h) const {
    return (static_cast<int64_t>(b) * seqlen + t) * nheads + h;
  }
  SG_DEVICE int64_t token(int b, int t) const { return static_cast<int64_t>(b) * seqlen + t; }
  // Element offset of the [P, N] state of (b, c, h).
  SG_DEVICE int64_t state_offset(int b, int c, int h, int state_elems) const {
    return ((static_cast<int64_t>(b) * nchunks + c) * nheads + h) * state_elems;
  }
};

// Tokens of the chunk starting at t0 (the last chunk may be short).
SG_DEVICE int chunk_length(int seqlen, int t0) { return seqlen - t0 < kQ ? seqlen - t0 : kQ; }

// Workspace carving; a pure function of the shape.
struct SsdWorkspaceLayout {
  size_t cum = 0, states32 = 0, states16 = 0, grads16 = 0, chunk_dot = 0, dA_part = 0, dD_part = 0, dbc_part = 0;
  size_t total = 0;
  int hsplit = 1;
};

// Blocks of the dB/dC kernel: B * C * G * hsplit. Split a group's heads over hsplit blocks (a divisor of
// heads_per_group) until there are enough blocks to fill an H200 twice over.
inline int ssd_head_split(const SsdShape& s) {
  const int64_t chunks = (s.seqlen + kQ - 1) / kQ;
  const int64_t blocks = s.batch * chunks * s.ngroups;
  const int64_t hpg = s.nheads / s.ngroups;
  for (int64_t d = 1; d <= hpg; ++d) {
    if (hpg % d == 0 && blocks * d >= 264) return static_cast<int>(d);
  }
  return static_cast<int>(hpg);
}

inline SsdWorkspaceLayout ssd_workspace_layout(const SsdShape& s) {
  SsdWorkspaceLayout w;
  const int64_t chunks = (s.seqlen + kQ - 1) / kQ;
  const int64_t state_elems = s.batch * chunks * s.nheads * s.headdim * s.dstate;
  size_t off = 0;
  auto take = [&off](int64_t bytes) {
    const size_t at = off;
    off += (static_cast<size_t>(bytes) + 255) / 256 * 256;
    return at;
  };
  w.hsplit = ssd_head_split(s);
  w.cum = take(s.batch * s.nheads * chunks * kQ * 4);
  w.states32 = take(state_elems * 4);
  w.states16 = take(state_elems * 2);
  w.grads16 = take(state_elems * 2);
  w.chunk_dot = take(s.batch * s.nheads * chunks * (s.headdim * s.dstate / kPassElems) * 4);
  w.dA_part = take(s.batch * chunks * s.nheads * 4);
  w.dD_part = take(s.batch * chunks * s.nheads * 4);
  w.dbc_part = take(w.hsplit > 1 ? 2 * w.hsplit * s.batch * s.seqlen * s.ngroups * s.dstate * 4 : 0);
  w.total = off;
  return w;
}

// Copies rows [0, rows) of a COLS-wide bf16 matrix (row r at src + r * row_stride, 16-byte aligned rows)
// into a shared tile [rows][smem_pitch(COLS)]; rows >= rows_valid become zeros. Optionally scales row r by
// row_scale[r] (rounding the product to bf16).
template <int COLS, int NTHREADS>
SG_DEVICE void stage_rows(bf16* dst, const bf16* src, int64_t row_stride, int rows, int rows_valid,
                          const float* row_scale = nullptr) {
  constexpr int kVecs = COLS / 8;
  for (int i = thread_index(); i < rows * kVecs; i += NTHREADS) {
    const int r = i / kVecs, v = i % kVecs;
    uint4 val = make_uint4(0u, 0u, 0u, 0u);
    if (r < rows_valid) {
      val = *reinterpret_cast<const uint4*>(src + r * row_stride + v * 8);
      if (row_scale != nullptr) {
        uint32_t* w = reinterpret_cast<uint32_t*>(&val);
        const float s = row_scale[r];
SG_UNROLL
        for (int k = 0; k < 4; ++k) {
          const float2 f = detail::unpack_bf16(w[k]);
          w[k] = detail::pack_bf16(f.x * s, f.y * s);
        }
      }
    }
    *reinterpret_cast<uint4*>(dst + r * detail::smem_pitch(COLS) + v * 8) = val;
  }
}

// Sum over a block of NTHREADS threads in a fixed order (butterfly in each warp, then the warp sums in
// order); every thread gets the total. scratch: NTHREADS / 32 floats of shared memory. Synchronises.
template <int NTHREADS>
SG_DEVICE float block_sum(float v, float* scratch) {
SG_UNROLL
  for (int o = 16; o > 0; o >>= 1) v += detail::shfl_xor(v, o);
  block_sync();
  if (lane_id() == 0) scratch[warp_id()] = v;
  block_sync();
  float total = 0.0f;
SG_UNROLL
  for (int w = 0; w < NTHREADS / 32; ++w) total += scratch[w];
  return total;
}

// Inclusive prefix sum over the 128 threads of a chunk block (thread i holds element i), fixed order.
// scratch: 4 floats. Synchronises.
SG_DEVICE float chunk_inclusive_scan(float v, float* scratch) {
  const int lane = static_cast<int>(lane_id()), warp = static_cast<int>(warp_id());
SG_UNROLL
  for (int d = 1; d < 32; d <<= 1) {
    const float o = detail::shfl_up(v, d);
    if (lane >= d) v += o;
  }
  block_sync();
  if (lane == 31) scratch[warp] = v;
  block_sync();
  for (int w = 0; w < warp; ++w) v += scratch[w];
  return v;
}

// Suffix sum: thread i gets sum_{j >= i} v_j. scratch: 4 floats. Synchronises.
SG_DEVICE float chunk_reverse_inclusive_scan(float v, float* scratch) {
  const int lane = static_cast<int>(lane_id()), warp = static_cast<int>(warp_id());
SG_UNROLL
  for (int d = 1; d < 32; d <<= 1) {
    const float o = detail::shfl_down(v, d);
    if (lane + d < 32) v += o;
  }
  block_sync();
  if (lane == 0) scratch[warp] = v;
  block_sync();
  for (int w = kChunkThreads / 32 - 1; w > warp; --w) v += scratch[w];
  return v;
}

// Sum over the 4 lanes of a quad (the lanes holding one row of a C fragment); all four get it.
SG_DEVICE float quad_sum(float v) {
  v += detail::shfl_xor(v, 1);
  v += detail::shfl_xor(v, 2);
  return v;
}

// Sum over the 8 quads' lanes with the same position in the quad (one column of a C fragment).
SG_DEVICE float column_sum(float v) {
  v += detail::shfl_xor(v, 4);
  v += detail::shfl_xor(v, 8);
  v += detail::shfl_xor(v, 16);
  return v;
}

// Stores two fp32 values as a bf16 pair at dst (4-byte aligned).
SG_DEVICE void store_bf16x2(bf16* dst, float lo, float hi) {
  *reinterpret_cast<uint32_t*>(dst) = detail::pack_bf16(lo, hi);
}
SG_DEVICE float2 load_bf16x2(const bf16* src) {
  return detail::unpack_bf16(*reinterpret_cast<const uint32_t*>(src));
}

}  // namespace sg::kernels::ssd
