#pragma once
// SSD scan backward kernels and launch sequence (see kernels/ssd_scan.h). Per chunk c of head h, with
// cum the in-chunk cumsum of dt*A, M_ts = (C_t . B_s) exp(cum_t - cum_s) dt_s (s <= t), H_c the state
// entering the chunk and G_c = dL/dS_c = dL/dH_{c+1}:
//   dx_s   = dt_s acc_s + D dy_s,  acc_s = sum_{t>=s} (M_ts / dt_s) dy_t + exp(cum_last - cum_s) G_c B_s
//   ddt_s  = <acc_s, x_s> + A da_s,  da = suffix sums of dcum (cum_t = sum_{r<=t} dt_r A)
//   dcum_t = sum_s w_ts - sum_s w_st + dy_t . y_off_t - w_state_t  (+ sum_s w_state_s + e_c <G_c, H_c> at
//            the last position), w_ts = (dy_t . x_s) M_ts, w_state_s = dt_s exp(..) <x_s, G_c B_s>
//   dCB_ts = sum_{h in group} (dy_t . x_s) exp(cum_t - cum_s) dt_s
//   dC_t   = sum_s dCB_ts B_s + sum_h exp(cum_t) dy_t H_c       dB_s = sum_t dCB_ts C_t + sum_h exp(..) dt_s x_s G_c
// Kernels, after recomputing the forward's cumsum, chunk states and H_c:
//   ssd_chunk_state_kernel<grad>        local state gradient sum_t exp(cum_t) dy_t C_t^T of each chunk
//   ssd_state_passing_backward_kernel   G_c from the last chunk down, and the chunk-decay term partials
//   ssd_chunk_backward_dx_kernel        grid (C, H, B): dx, ddt, per-chunk dA and dD partials
//   ssd_chunk_backward_dbc_kernel       grid (C, G * hsplit, B): dB, dC for a group's heads (8 warps: warp w
//                                       owns rows 16w.. of dC and of dB, which balances the triangle)
//   ssd_param_grad_reduce_kernel        dA, dD: the per-chunk partials summed in a fixed order
//   ssd_dbc_reduce_kernel               when a group's heads are split over blocks: their partials, in order
#include "kernels/ssd_scan_forward.cuh"

namespace sg::kernels::ssd {

using detail::pack_c_to_a;
using detail::scale_a_rows;

template <int P, int N>
SG_KERNEL(kPassThreads) ssd_state_passing_backward_kernel(SsdArgs a) {
  const int slice = detail::block_index_x(), h = detail::block_index_y(), b = detail::block_index_z();
  const int tid = thread_index();
  const int e0 = (slice * kPassThreads + tid) * 4;
  constexpr int kSlices = P * N / kPassElems;
  float* scratch = reinterpret_cast<float*>(detail::dynamic_smem());
  float4 g = make_float4(0.0f, 0.0f, 0.0f, 0.0f);  // dL/dH_{c+1}
  for (int c = a.nchunks - 1; c >= 0; --c) {
    const int64_t off = a.state_offset(b, c, h, P * N) + e0;
    uint2 packed;
    packed.x = detail::pack_bf16(g.x, g.y);
    packed.y = detail::pack_bf16(g.z, g.w);
    *reinterpret_cast<uint2*>(a.grads16 + off) = packed;
    const float e = fast_exp(a.cum[a.cum_offset(b, h, c) + kQ - 1]);
    const uint2 hv = *reinterpret_cast<const uint2*>(a.states16 + off);
    const float2 h01 = detail::unpack_bf16(hv.x), h23 = detail::unpack_bf16(hv.y);
    const float dot = block_sum<kPassThreads>(g.x * h01.x + g.y * h01.y + g.z * h23.x + g.w * h23.y, scratch);
    if (tid == 0) a.chunk_dot[(static_cast<int64_t>(b * a.nheads + h) * a.nchunks + c) * kSlices + slice] = e * dot;
    const float4 d = *reinterpret_cast<const float4*>(a.states32 + off);
    g = make_float4(d.x + e * g.x, d.y + e * g.y, d.z + e * g.z, d.w + e * g.w);
  }
}

template <int P, int N>
constexpr size_t chunk_backward_dx_smem_bytes() {
  return static_cast<size_t>(kQ) * (2 * smem_pitch(N) + 2 * smem_pitch(P)) * 2 +
         static_cast<size_t>(2 * P) * smem_pitch(N) * 2 + (10 * kQ + 32) * 4;
}

template <int P, int N>
SG_KERNEL(kChunkThreads) ssd_chunk_backward_dx_kernel(SsdArgs a) {
  constexpr int kPP = smem_pitch(P), kPN = smem_pitch(N), kWarps = kChunkThreads / 32;
  const int c = detail::block_index_x(), h = detail::block_index_y(), b = detail::block_index_z();
  const int tid = thread_index(), warp = static_cast<int>(warp_id()), lane = static_cast<int>(lane_id());
  const int t0 = c * kQ, L = chunk_length(a.seqlen, t0);
  const int g = h / a.heads_per_group;
  bf16* Cs = reinterpret_cast<bf16*>(detail::dynamic_smem());
  bf16* Bs = Cs + kQ * kPN;
  bf16* Xs = Bs + kQ * kPN;
  bf16* DYs = Xs + kQ * kPP;
  bf16* Gs = DYs + kQ * kPP;  // [P][N]: G_c
  bf16* Hs = Gs + P * kPN;    // [P][N]: H_c
  float* cum = reinterpret_cast<float*>(Hs + P * kPN);
  float* dts = cum + kQ;
  float* rowv = dts + kQ;      // dy_t . y_off_t
  float* ddt_dir = rowv + kQ;  // <acc_s, x_s>
  float* wstate = ddt_dir + kQ;
  float* wrow = wstate + kQ;    // row sums of w (the same fp32 values as the column sums: exact telescoping)
  float* colsum = wrow + kQ;    // [kWarps][Q]: per-warp column sums of w
  float* scratch = colsum + kWarps * kQ;

  cum[tid] = a.cum[a.cum_offset(b, h, c) + tid];
  dts[tid] = tid < L ? a.dt[a.dt_index(b, t0 + tid, h)] : 0.0f;
  rowv[tid] = 0.0f, ddt_dir[tid] = 0.0f, wstate[tid] = 0.0f, wrow[tid] = 0.0f;
  for (int w = 0; w < kWarps; ++w) colsum[w * kQ + tid] = 0.0f;
  stage_rows<N, kChunkThreads>(Cs, a.Cm + a.token(b, t0) * a.cm_stride + g * N, a.cm_stride, kQ, L);
  stage_rows<N, kChunkThreads>(Bs, a.Bm + a.token(b, t0) * a.bm_stride + g * N, a.bm_stride, kQ, L);
  stage_rows<P, kChunkThreads>(Xs, a.x + a.token(b, t0) * a.x_stride + h * P, a.x_stride, kQ, L);
  stage_rows<P, kChunkThreads>(DYs, a.dy + a.token(b, t0) * a.dy_stride + h * P, a.dy_stride, kQ, L);
  stage_rows<N, kChunkThreads>(Gs, a.grads16 + a.state_offset(b, c, h, P * N), N, P, P);
  stage_rows<N, kChunkThreads>(Hs, a.states16 + a.state_offset(b, c, h, P * N), N, P, P);
  block_sync();

  const float cum_last = cum[kQ - 1];
  const float d_skip = a.D != nullptr ? a.D[h] : 0.0f;
  float skip_dot = 0.0f;  // this thread's part of sum dy . x (dD)
  for (int pass = 0; pass < 2; ++pass) {
    const int rb = pass == 0 ? warp : 7 - warp;
    const int r0 = rb * 16;
    if (r0 >= L) continue;
    const int lo = r0 + c_row(0), hi = r0 + c_row(2);  // the two rows this lane holds
    // Inter-chunk output term, rows t: v_t = exp(cum_t) dy_t . (C_t H_c^T).
    if (c > 0) {
      uint32_t cf[N / 16][4];
SG_UNROLL
      for (int kk = 0; kk < N / 16; ++kk) load_a(cf[kk], Cs, kPN, r0, kk * 16);
      float yoff[P / 8][4] = {};
SG_UNROLL
      for (int kk = 0; kk < N / 16; ++kk) mma_k_step<P / 16, false>(yoff, cf[kk], Hs, kPN, 0, kk * 16);
      float v_lo = 0.0f, v_hi = 0.0f;
SG_UNROLL
      for (int nt = 0; nt < P / 8; ++nt) {
        const int p = nt * 8 + c_col(0);
        const float2 dlo = load_bf16x2(DYs + lo * kPP + p), dhi = load_bf16x2(DYs + hi * kPP + p);
        v_lo += yoff[nt][0] * dlo.x + yoff[nt][1] * dlo.y;
        v_hi += yoff[nt][2] * dhi.x + yoff[nt][3] * dhi.y;
      }
      v_lo = quad_sum(v_lo), v_hi = quad_sum(v_hi);
      if ((lane & 3) == 0) rowv[lo] = fast_exp(cum[lo]) * v_lo, rowv[hi] = fast_exp(cum[hi]) * v_hi;
    }
    uint32_t bfr[N / 16][4], xf[P / 16][4];
SG_UNROLL
    for (int kk = 0; kk < N / 16; ++kk) load_a(bfr[kk], Bs, kPN, r0, kk * 16);
SG_UNROLL
    for (int kp = 0; kp < P / 16; ++kp) load_a(xf[kp], Xs, kPP, r0, kp * 16);
    float acc[P / 8][4] = {};
    // State term, rows s: exp(cum_last - cum_s) B_s G_c^T (G of the last chunk is 0: skipped).
    if (c + 1 < a.nchunks) {
SG_UNROLL
      for (int kk = 0; kk < N / 16; ++kk) mma_k_step<P / 16, false>(acc, bfr[kk], Gs, kPN, 0, kk * 16);
      const float e_lo = fast_exp(cum_last - cum[lo]), e_hi = fast_exp(cum_last - cum[hi]);
      float w_lo = 0.0f, w_hi = 0.0f;
SG_UNROLL
      for (int nt = 0; nt < P / 8; ++nt) {
        acc[nt][0] *= e_lo, acc[nt][1] *= e_lo, acc[nt][2] *= e_hi, acc[nt][3] *= e_hi;
        const int p = nt * 8 + c_col(0);
        const float2 xlo = load_bf16x2(Xs + lo * kPP + p), xhi = load_bf16x2(Xs + hi * kPP + p);
        w_lo += acc[nt][0] * xlo.x + acc[nt][1] * xlo.y;
        w_hi += acc[nt][2] * xhi.x + acc[nt][3] * xhi.y;
      }
      w_lo = quad_sum(w_lo), w_hi = quad_sum(w_hi);
      if ((lane & 3) == 0) wstate[lo] = dts[lo] * w_lo, wstate[hi] = dts[hi] * w_hi;
    }
    // Intra-chunk, target blocks j >= rb: M^T (s rows, t cols) = (B_s . C_t) exp(cum_t - cum_s) for t >= s;
    // acc += M^T dy_j; w = (x_s . dy_t) M^T dt_s: dcum_t += column sums, dcum_s -= row sums.
    float wrow_lo = 0.0f, wrow_hi = 0.0f;
    for (int j = rb; j < kQ / 16 && j * 16 < L; ++j) {
      float mt[2][4] = {}, dm[2][4] = {};
SG_UNROLL
      for (int kk = 0; kk < N / 16; ++kk) mma_k_step<1, false>(mt, bfr[kk], Cs, kPN, j * 16, kk * 16);
SG_UNROLL
      for (int kp = 0; kp < P / 16; ++kp) mma_k_step<1, false>(dm, xf[kp], DYs, kPP, j * 16, kp * 16);
      float col[2][2] = {};
SG_UNROLL
      for (int nt = 0; nt < 2; ++nt) {
SG_UNROLL
        for (int i = 0; i < 4; ++i) {
          const int s = r0 + c_row(i), t = j * 16 + nt * 8 + c_col(i);
          const float m = t >= s ? mt[nt][i] * fast_exp(cum[t] - cum[s]) : 0.0f;
          const float w = dm[nt][i] * m * dts[s];
          col[nt][i & 1] += w;
          (i < 2 ? wrow_lo : wrow_hi) += w;
          mt[nt][i] = m;
        }
      }
      uint32_t am[4];
      pack_c_to_a(am, mt[0], mt[1]);
      mma_k_step<P / 16, true>(acc, am, DYs, kPP, 0, j * 16);
SG_UNROLL
      for (int nt = 0; nt < 2; ++nt) {
SG_UNROLL
        for (int q = 0; q < 2; ++q) {
          const float v = column_sum(col[nt][q]);
          if (lane < 4) colsum[warp * kQ + j * 16 + nt * 8 + lane * 2 + q] += v;
        }
      }
    }
    wrow_lo = quad_sum(wrow_lo), wrow_hi = quad_sum(wrow_hi);
    if ((lane & 3) == 0) wrow[lo] = wrow_lo, wrow[hi] = wrow_hi;
    // Rows s: dx = dt_s acc + D dy; ddt_direct = <acc_s, x_s>.
SG_UNROLL
    for (int half = 0; half < 2; ++half) {
      const int s = half == 0 ? lo : hi;
      float dd = 0.0f;
      bf16* dxrow = a.dx + a.token(b, t0 + s) * a.dx_stride + h * P;
SG_UNROLL
      for (int nt = 0; nt < P / 8; ++nt) {
        const int p = nt * 8 + c_col(0);
        const float2 xv = load_bf16x2(Xs + s * kPP + p), dyv = load_bf16x2(DYs + s * kPP + p);
        const float a0 = acc[nt][2 * half], a1 = acc[nt][2 * half + 1];
        dd += a0 * xv.x + a1 * xv.y;
        skip_dot += dyv.x * xv.x + dyv.y * xv.y;
        if (s < L) store_bf16x2(dxrow + p, dts[s] * a0 + d_skip * dyv.x, dts[s] * a1 + d_skip * dyv.y);
      }
      dd = quad_sum(dd);
      if ((lane & 3) == 0) ddt_dir[s] = dd;
    }
  }
  block_sync();
  // dcum -> da (suffix sums) -> ddt, dA partial; dD partial.
  const float wstate_total = block_sum<kChunkThreads>(wstate[tid], scratch);
  float dcum = 0.0f;
  if (tid < L) {
    dcum = rowv[tid] - wrow[tid] - wstate[tid];
    for (int w = 0; w < kWarps; ++w) dcum += colsum[w * kQ + tid];
    if (tid == L - 1) {
      constexpr int kSlices = P * N / kPassElems;
      const float* dots = a.chunk_dot + (static_cast<int64_t>(b * a.nheads + h) * a.nchunks + c) * kSlices;
      float chunk_term = 0.0f;
      for (int k = 0; k < kSlices; ++k) chunk_term += dots[k];
      dcum += wstate_total + chunk_term;
    }
  }
  const float da = chunk_reverse_inclusive_scan(dcum, scratch);
  const float Ah = a.A[h];
  if (tid < L) a.ddt[a.dt_index(b, t0 + tid, h)] = ddt_dir[tid] + Ah * da;
  const float dA_chunk = block_sum<kChunkThreads>(tid < L ? dts[tid] * da : 0.0f, scratch);
  const float dD_chunk = block_sum<kChunkThreads>(skip_dot, scratch);
  if (tid == 0) {
    const int64_t part = (static_cast<int64_t>(b) * a.nchunks + c) * a.nheads + h;
    a.dA_part[part] = dA_chunk;
    a.dD_part[part] = dD_chunk;
  }
}

inline constexpr int kDcbTiles = 36;  // lower-triangular 16x16 tiles of a 128x128 chunk matrix
inline constexpr int kDcbTilesPerWarp = (kDcbTiles + kGroupThreads / 32 - 1) / (kGroupThreads / 32);

SG_DEVICE void lower_tile(int k, int& i, int& j) {
  i = 0;
  while ((i + 1) * (i + 2) / 2 <= k) ++i;
  j = k - i * (i + 1) / 2;
}

template <int P, int N>
constexpr size_t chunk_backward_dbc_smem_bytes() {
  return static_cast<size_t>(kQ) * (2 * smem_pitch(N) + 2 * smem_pitch(P) + smem_pitch(kQ)) * 2 +
         static_cast<size_t>(2 * P) * smem_pitch(N) * 2 + 4 * kQ * 4;
}

template <int P, int N>
SG_KERNEL(kGroupThreads) ssd_chunk_backward_dbc_kernel(SsdArgs a) {
  constexpr int kPP = smem_pitch(P), kPN = smem_pitch(N), kPQ = smem_pitch(kQ);
  const int c = detail::block_index_x(), gs = detail::block_index_y(), b = detail::block_index_z();
  const int tid = thread_index(), warp = static_cast<int>(warp_id());
  const int t0 = c * kQ, L = chunk_length(a.seqlen, t0);
  const int g = gs / a.hsplit, slice = gs % a.hsplit;
  const int heads_per_block = a.heads_per_group / a.hsplit;
  const int h_begin = g * a.heads_per_group + slice * heads_per_block;
  bf16* Cs = reinterpret_cast<bf16*>(detail::dynamic_smem());
  bf16* Bs = Cs + kQ * kPN;
  bf16* Xs = Bs + kQ * kPN;
  bf16* DYs = Xs + kQ * kPP;
  bf16* dCBs = DYs + kQ * kPP;  // [Q][Q]: dCB summed over this block's heads (lower tiles only)
  bf16* Hs = dCBs + kQ * kPQ;
  bf16* Gs = Hs + P * kPN;
  float* cum = reinterpret_cast<float*>(Gs + P * kPN);
  float* dts = cum + kQ;
  float* ecum = dts + kQ;    // exp(cum_t): scales dy rows in the H_c term of dC
  float* estate = ecum + kQ;  // exp(cum_last - cum_s) dt_s: scales x rows in the G_c term of dB

  stage_rows<N, kGroupThreads>(Cs, a.Cm + a.token(b, t0) * a.cm_stride + g * N, a.cm_stride, kQ, L);
  stage_rows<N, kGroupThreads>(Bs, a.Bm + a.token(b, t0) * a.bm_stride + g * N, a.bm_stride, kQ, L);
  const int r0 = warp * 16;  // rows of dC (t) and of dB (s) this warp owns
  const int lo = r0 + c_row(0), hi = r0 + c_row(2);
  float dcb[kDcbTilesPerWarp][2][4] = {};
  float acc_c[N / 8][4] = {}, acc_b[N / 8][4] = {};
  for (int hh = 0; hh < heads_per_block; ++hh) {
    const int h = h_begin + hh;
    block_sync();  // the previous head's tiles are no longer read
    stage_rows<P, kGroupThreads>(Xs, a.x + a.token(b, t0) * a.x_stride + h * P, a.x_stride, kQ, L);
    stage_rows<P, kGroupThreads>(DYs, a.dy + a.token(b, t0) * a.dy_stride + h * P, a.dy_stride, kQ, L);
    stage_rows<N, kGroupThreads>(Hs, a.states16 + a.state_offset(b, c, h, P * N), N, P, P);
    stage_rows<N, kGroupThreads>(Gs, a.grads16 + a.state_offset(b, c, h, P * N), N, P, P);
    if (tid < kQ) {
      cum[tid] = a.cum[a.cum_offset(b, h, c) + tid];
      dts[tid] = tid < L ? a.dt[a.dt_index(b, t0 + tid, h)] : 0.0f;
    }
    block_sync();
    if (tid < kQ) {
      ecum[tid] = tid < L ? fast_exp(cum[tid]) : 0.0f;
      estate[tid] = tid < L ? fast_exp(cum[kQ - 1] - cum[tid]) * dts[tid] : 0.0f;
    }
    block_sync();
    // dCB tiles (t block i, s block j <= i), tile k of the warp = warp + 8 k: dCB += (dy_t . x_s) decay dt_s.
SG_UNROLL
    for (int k = 0; k < kDcbTilesPerWarp; ++k) {
      const int tile = warp + k * (kGroupThreads / 32);
      if (tile >= kDcbTiles) break;
      int i, j;
      lower_tile(tile, i, j);
      if (i * 16 >= L) continue;
      float dm[2][4] = {};
SG_UNROLL
      for (int kp = 0; kp < P / 16; ++kp) {
        uint32_t af[4];
        load_a(af, DYs, kPP, i * 16, kp * 16);
        mma_k_step<1, false>(dm, af, Xs, kPP, j * 16, kp * 16);
      }
SG_UNROLL
      for (int nt = 0; nt < 2; ++nt) {
SG_UNROLL
        for (int e = 0; e < 4; ++e) {
          const int t = i * 16 + c_row(e), s = j * 16 + nt * 8 + c_col(e);
          if (s <= t) dcb[k][nt][e] += dm[nt][e] * fast_exp(cum[t] - cum[s]) * dts[s];
        }
      }
    }
    if (r0 < L) {
SG_UNROLL
      for (int kp = 0; kp < P / 16; ++kp) {
        uint32_t af[4];
        if (c > 0) {  // dC_t += exp(cum_t) dy_t H_c
          load_a(af, DYs, kPP, r0, kp * 16);
          scale_a_rows(af, ecum[lo], ecum[hi]);
          mma_k_step<N / 16, true>(acc_c, af, Hs, kPN, 0, kp * 16);
        }
        if (c + 1 < a.nchunks) {  // dB_s += exp(cum_last - cum_s) dt_s x_s G_c
          load_a(af, Xs, kPP, r0, kp * 16);
          scale_a_rows(af, estate[lo], estate[hi]);
          mma_k_step<N / 16, true>(acc_b, af, Gs, kPN, 0, kp * 16);
        }
      }
    }
  }
SG_UNROLL
  for (int k = 0; k < kDcbTilesPerWarp; ++k) {
    const int tile = warp + k * (kGroupThreads / 32);
    if (tile >= kDcbTiles) break;
    int i, j;
    lower_tile(tile, i, j);
SG_UNROLL
    for (int nt = 0; nt < 2; ++nt) {
SG_UNROLL
      for (int half = 0; half < 2; ++half) {
        const int row = i * 16 + c_row(2 * half), col = j * 16 + nt * 8 + c_col(0);
        store_bf16x2(dCBs + row * kPQ + col, dcb[k][nt][2 * half], dcb[k][nt][2 * half + 1]);
      }
    }
  }
  block_sync();
  if (r0 >= L) return;
  // dC rows t: + sum_{j <= warp} dCB[t, j] B_j;  dB rows s: + sum_{i >= warp} dCB[i, s]^T C_i.
  for (int j = 0; j <= warp; ++j) {
    uint32_t af[4];
    load_a(af, dCBs, kPQ, r0, j * 16);
    mma_k_step<N / 16, true>(acc_c, af, Bs, kPN, 0, j * 16);
  }
  for (int i = warp; i < kQ / 16 && i * 16 < L; ++i) {
    uint32_t af[4];
    load_a_trans(af, dCBs, kPQ, r0, i * 16);
    mma_k_step<N / 16, true>(acc_b, af, Cs, kPN, 0, i * 16);
  }
SG_UNROLL
  for (int half = 0; half < 2; ++half) {
    const int r = half == 0 ? lo : hi;
    if (r >= L) continue;
    const int64_t tok = a.token(b, t0 + r);
SG_UNROLL
    for (int nt = 0; nt < N / 8; ++nt) {
      const int n = nt * 8 + c_col(0);
      if (a.hsplit == 1) {
        store_bf16x2(a.dCm + tok * a.dcm_stride + g * N + n, acc_c[nt][2 * half], acc_c[nt][2 * half + 1]);
        store_bf16x2(a.dBm + tok * a.dbm_stride + g * N + n, acc_b[nt][2 * half], acc_b[nt][2 * half + 1]);
      } else {
        const int64_t plane = static_cast<int64_t>(a.batch) * a.seqlen * a.ngroups * N;
        const int64_t e = (tok * a.ngroups + g) * N + n;
        *reinterpret_cast<float2*>(a.dbc_part + slice * plane + e) =
            make_float2(acc_b[nt][2 * half], acc_b[nt][2 * half + 1]);
        *reinterpret_cast<float2*>(a.dbc_part + (a.hsplit + slice) * plane + e) =
            make_float2(acc_c[nt][2 * half], acc_c[nt][2 * half + 1]);
      }
    }
  }
}

// dA[h] = sum over (b, c) of the per-chunk partials, in order; dD likewise. (A template only so that the
// header defines no non-inline function.)
template <int kThreads>
SG_KERNEL(kThreads) ssd_param_grad_reduce_kernel(SsdArgs a) {
  for (int h = thread_index(); h < a.nheads; h += kThreads) {
    float dA = 0.0f, dD = 0.0f;
    for (int64_t bc = 0; bc < static_cast<int64_t>(a.batch) * a.nchunks; ++bc) {
      dA += a.dA_part[bc * a.nheads + h];
      dD += a.dD_part[bc * a.nheads + h];
    }
    a.dA[h] = dA;
    if (a.dD != nullptr) a.dD[h] = dD;
  }
}

// dB, dC = sum over the hsplit head slices (in order), rounded to bf16; one thread per element pair.
template <int N>
SG_KERNEL(256) ssd_dbc_reduce_kernel(SsdArgs a) {
  const int64_t plane = static_cast<int64_t>(a.batch) * a.seqlen * a.ngroups * N;
  const int64_t pair = static_cast<int64_t>(detail::block_index_x()) * 256 + thread_index();
  if (pair * 2 >= 2 * plane) return;
  const int which = pair * 2 >= plane ? 1 : 0;  // 0: dB, 1: dC
  const int64_t e = pair * 2 - which * plane;
  float2 sum = make_float2(0.0f, 0.0f);
  for (int k = 0; k < a.hsplit; ++k) {
    const float2 v = *reinterpret_cast<const float2*>(a.dbc_part + (which * a.hsplit + k) * plane + e);
    sum.x += v.x, sum.y += v.y;
  }
  const int64_t tok = e / (static_cast<int64_t>(a.ngroups) * N), col = e % (static_cast<int64_t>(a.ngroups) * N);
  bf16* out = which == 0 ? a.dBm + tok * a.dbm_stride + col : a.dCm + tok * a.dcm_stride + col;
  store_bf16x2(out, sum.x, sum.y);
}

template <int P, int N, class Launch>
void run_backward(const Launch& launch, const SsdArgs& a) {
  const dim3 chunk_grid(a.nchunks, a.nheads, a.batch);
  const dim3 pass_grid(P * N / kPassElems, a.nheads, a.batch);
  launch("ssd_chunk_state_kernel", ssd_chunk_state_kernel<P, N, false>, chunk_grid, kChunkThreads,
         chunk_state_smem_bytes<P, N>(), a);
  launch("ssd_state_passing_kernel", ssd_state_passing_kernel<P, N>, pass_grid, kPassThreads, size_t{0}, a);
  launch("ssd_chunk_state_kernel(grad)", ssd_chunk_state_kernel<P, N, true>, chunk_grid, kChunkThreads,
         chunk_state_smem_bytes<P, N>(), a);
  launch("ssd_state_passing_backward_kernel", ssd_state_passing_backward_kernel<P, N>, pass_grid, kPassThreads,
         size_t{kPassThreads / 32 * 4}, a);
  launch("ssd_chunk_backward_dx_kernel", ssd_chunk_backward_dx_kernel<P, N>, chunk_grid, kChunkThreads,
         chunk_backward_dx_smem_bytes<P, N>(), a);
  launch("ssd_chunk_backward_dbc_kernel", ssd_chunk_backward_dbc_kernel<P, N>,
         dim3(a.nchunks, a.ngroups * a.hsplit, a.batch), kGroupThreads, chunk_backward_dbc_smem_bytes<P, N>(), a);
  launch("ssd_param_grad_reduce_kernel", ssd_param_grad_reduce_kernel<128>, dim3(1), 128, size_t{0}, a);
  if (a.hsplit > 1) {
    const int64_t pairs = static_cast<int64_t>(a.batch) * a.seqlen * a.ngroups * N;  // 2 planes / 2 per thread
    launch("ssd_dbc_reduce_kernel", ssd_dbc_reduce_kernel<N>, dim3(static_cast<unsigned>((pairs + 255) / 256)), 256,
           size_t{0}, a);
  }
}

}  // namespace sg::kernels::ssd
