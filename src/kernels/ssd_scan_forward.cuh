#pragma once
// SSD scan forward kernels (see kernels/ssd_scan.h for the algorithm) and the launch sequence, written
// once over a launch policy so the CPU emulator of the tests runs the very same code.
//
//   ssd_chunk_state_kernel      grid (C, H, B): cumsum of dt*A; S_c = (exp(cum_last - cum) dt x)^T B.
//                               In gradient mode the same product gives dL/dH_c (local) = (exp(cum) dy)^T C.
//   ssd_state_passing_kernel    grid (P*N / 512, H, B): H_c for every chunk, sequential over c, fp32.
//   ssd_chunk_scan_kernel       grid (C, H, B): y = (C B^T o decay o dt) x + exp(cum) C H_c^T + D x.
//
// Chunk kernels use 4 warps; warp w owns the 16-row blocks w and 7 - w of the chunk, which balances the
// causal (lower-triangular) work.
#include "kernels/ssd_scan_common.cuh"

namespace sg::kernels::ssd {

using detail::c_col;
using detail::c_row;
using detail::fast_exp;
using detail::load_a;
using detail::load_a_trans;
using detail::load_b_pair;
using detail::load_b_pair_trans;
using detail::mma_bf16;
using detail::mma_k_step;
using detail::smem_pitch;

template <int P, int N>
constexpr size_t chunk_state_smem_bytes() {
  return static_cast<size_t>(kQ) * (smem_pitch(P) + smem_pitch(N)) * 2 + (kQ + 32) * 4;
}

// out[p][n] = sum_s scale_s X[s][p] Y[s][n] for one chunk of one head, written fp32 to states32.
// Forward (kGrad false): X = x, Y = B (group), scale = exp(cum_last - cum_s) dt_s; also writes the cumsum.
// Gradient (kGrad true): X = dy, Y = C, scale = exp(cum_t), the cumsum read back.
template <int P, int N, bool kGrad>
SG_KERNEL(kChunkThreads) ssd_chunk_state_kernel(SsdArgs a) {
  constexpr int kPP = smem_pitch(P), kPN = smem_pitch(N);
  const int c = detail::block_index_x(), h = detail::block_index_y(), b = detail::block_index_z();
  const int tid = thread_index(), warp = static_cast<int>(warp_id());
  const int t0 = c * kQ, L = chunk_length(a.seqlen, t0);
  const int g = h / a.heads_per_group;
  bf16* Xs = reinterpret_cast<bf16*>(detail::dynamic_smem());
  bf16* Ys = Xs + kQ * kPP;
  float* scale = reinterpret_cast<float*>(Ys + kQ * kPN);
  float* scratch = scale + kQ;
  float* cum = a.cum + a.cum_offset(b, h, c);

  if constexpr (!kGrad) {
    const float dt = tid < L ? a.dt[a.dt_index(b, t0 + tid, h)] : 0.0f;
    const float cs = chunk_inclusive_scan(dt * a.A[h], scratch);
    cum[tid] = cs;                   // positions >= L repeat the chunk's last value
    scale[tid] = cs;                 // broadcast the last value through shared memory
    block_sync();
    const float last = scale[kQ - 1];
    block_sync();
    scale[tid] = tid < L ? fast_exp(last - cs) * dt : 0.0f;
  } else {
    scale[tid] = tid < L ? fast_exp(cum[tid]) : 0.0f;
  }
  block_sync();
  const bf16* X = kGrad ? a.dy + a.token(b, t0) * a.dy_stride : a.x + a.token(b, t0) * a.x_stride;
  const int64_t x_stride = kGrad ? a.dy_stride : a.x_stride;
  const bf16* Y = kGrad ? a.Cm + a.token(b, t0) * a.cm_stride : a.Bm + a.token(b, t0) * a.bm_stride;
  const int64_t y_stride = kGrad ? a.cm_stride : a.bm_stride;
  stage_rows<P, kChunkThreads>(Xs, X + h * P, x_stride, kQ, L, scale);
  stage_rows<N, kChunkThreads>(Ys, Y + g * N, y_stride, kQ, L);
  block_sync();

  float* out = a.states32 + a.state_offset(b, c, h, P * N);
  for (int rb = warp; rb < P / 16; rb += kChunkThreads / 32) {
    float acc[N / 8][4] = {};
    for (int kk = 0; kk * 16 < L; ++kk) {
      uint32_t af[4];
      load_a_trans(af, Xs, kPP, rb * 16, kk * 16);
      mma_k_step<N / 16, true>(acc, af, Ys, kPN, 0, kk * 16);
    }
SG_UNROLL
    for (int nt = 0; nt < N / 8; ++nt) {
SG_UNROLL
      for (int half = 0; half < 2; ++half) {
        const int row = rb * 16 + c_row(2 * half), col = nt * 8 + c_col(0);
        *reinterpret_cast<float2*>(out + row * N + col) = make_float2(acc[nt][2 * half], acc[nt][2 * half + 1]);
      }
    }
  }
}

// Sequential over chunks: states16[c] = H_c (bf16 copy of the fp32 running state), H_{c+1} = e_c H_c + S_c.
template <int P, int N>
SG_KERNEL(kPassThreads) ssd_state_passing_kernel(SsdArgs a) {
  const int slice = detail::block_index_x(), h = detail::block_index_y(), b = detail::block_index_z();
  const int e0 = (slice * kPassThreads + thread_index()) * 4;
  float4 run = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  float4 next = *reinterpret_cast<const float4*>(a.states32 + a.state_offset(b, 0, h, P * N) + e0);
  for (int c = 0; c < a.nchunks; ++c) {
    const int64_t off = a.state_offset(b, c, h, P * N) + e0;
    const float4 s = next;
    if (c + 1 < a.nchunks) next = *reinterpret_cast<const float4*>(a.states32 + a.state_offset(b, c + 1, h, P * N) + e0);
    uint2 packed;
    packed.x = detail::pack_bf16(run.x, run.y);
    packed.y = detail::pack_bf16(run.z, run.w);
    *reinterpret_cast<uint2*>(a.states16 + off) = packed;
    const float e = fast_exp(a.cum[a.cum_offset(b, h, c) + kQ - 1]);
    run = make_float4(e * run.x + s.x, e * run.y + s.y, e * run.z + s.z, e * run.w + s.w);
  }
}

template <int P, int N>
constexpr size_t chunk_scan_smem_bytes() {
  return static_cast<size_t>(kQ) * (2 * smem_pitch(N) + smem_pitch(P)) * 2 +
         static_cast<size_t>(P) * smem_pitch(N) * 2 + 2 * kQ * 4;
}

template <int P, int N>
SG_KERNEL(kChunkThreads) ssd_chunk_scan_kernel(SsdArgs a) {
  constexpr int kPP = smem_pitch(P), kPN = smem_pitch(N);
  const int c = detail::block_index_x(), h = detail::block_index_y(), b = detail::block_index_z();
  const int tid = thread_index(), warp = static_cast<int>(warp_id());
  const int t0 = c * kQ, L = chunk_length(a.seqlen, t0);
  const int g = h / a.heads_per_group;
  bf16* Cs = reinterpret_cast<bf16*>(detail::dynamic_smem());
  bf16* Bs = Cs + kQ * kPN;
  bf16* Xs = Bs + kQ * kPN;
  bf16* Hs = Xs + kQ * kPP;  // [P][N]: H_c
  float* cum = reinterpret_cast<float*>(Hs + P * kPN);
  float* dts = cum + kQ;

  cum[tid] = a.cum[a.cum_offset(b, h, c) + tid];
  dts[tid] = tid < L ? a.dt[a.dt_index(b, t0 + tid, h)] : 0.0f;
  stage_rows<N, kChunkThreads>(Cs, a.Cm + a.token(b, t0) * a.cm_stride + g * N, a.cm_stride, kQ, L);
  stage_rows<N, kChunkThreads>(Bs, a.Bm + a.token(b, t0) * a.bm_stride + g * N, a.bm_stride, kQ, L);
  stage_rows<P, kChunkThreads>(Xs, a.x + a.token(b, t0) * a.x_stride + h * P, a.x_stride, kQ, L);
  stage_rows<N, kChunkThreads>(Hs, a.states16 + a.state_offset(b, c, h, P * N), N, P, P);
  block_sync();

  const float d_skip = a.D != nullptr ? a.D[h] : 0.0f;
  for (int pass = 0; pass < 2; ++pass) {
    const int rb = pass == 0 ? warp : 7 - warp;  // rows t in [16 rb, 16 rb + 16)
    if (rb * 16 >= L) continue;
    uint32_t cf[N / 16][4];
SG_UNROLL
    for (int kk = 0; kk < N / 16; ++kk) load_a(cf[kk], Cs, kPN, rb * 16, kk * 16);
    float acc[P / 8][4] = {};
    // Inter-chunk: exp(cum_t) C_t H_c^T (H_0 = 0: skipped).
    if (c > 0) {
SG_UNROLL
      for (int kk = 0; kk < N / 16; ++kk) mma_k_step<P / 16, false>(acc, cf[kk], Hs, kPN, 0, kk * 16);
      const float e_lo = fast_exp(cum[rb * 16 + c_row(0)]), e_hi = fast_exp(cum[rb * 16 + c_row(2)]);
SG_UNROLL
      for (int nt = 0; nt < P / 8; ++nt) {
        acc[nt][0] *= e_lo, acc[nt][1] *= e_lo;
        acc[nt][2] *= e_hi, acc[nt][3] *= e_hi;
      }
    }
    // Intra-chunk: for each source block j <= rb, M = (C B_j^T) o exp(cum_t - cum_s) dt_s (s <= t), acc += M x_j.
    for (int j = 0; j <= rb; ++j) {
      float sc[2][4] = {};
SG_UNROLL
      for (int kk = 0; kk < N / 16; ++kk) mma_k_step<1, false>(sc, cf[kk], Bs, kPN, j * 16, kk * 16);
SG_UNROLL
      for (int nt = 0; nt < 2; ++nt) {
SG_UNROLL
        for (int i = 0; i < 4; ++i) {
          const int t = rb * 16 + c_row(i), s = j * 16 + nt * 8 + c_col(i);
          sc[nt][i] = s <= t ? sc[nt][i] * fast_exp(cum[t] - cum[s]) * dts[s] : 0.0f;
        }
      }
      uint32_t am[4];
      detail::pack_c_to_a(am, sc[0], sc[1]);
      mma_k_step<P / 16, true>(acc, am, Xs, kPP, 0, j * 16);
    }
    // y = acc + D x, rows t < L.
SG_UNROLL
    for (int half = 0; half < 2; ++half) {
      const int t = rb * 16 + c_row(2 * half);
      if (t >= L) continue;
      bf16* yrow = a.y + a.token(b, t0 + t) * a.y_stride + h * P;
SG_UNROLL
      for (int nt = 0; nt < P / 8; ++nt) {
        const int p = nt * 8 + c_col(0);
        const float2 xv = load_bf16x2(Xs + t * kPP + p);
        store_bf16x2(yrow + p, acc[nt][2 * half] + d_skip * xv.x, acc[nt][2 * half + 1] + d_skip * xv.y);
      }
    }
  }
}

// The forward launch sequence over a launch policy `launch(name, kernel, grid, threads, smem_bytes, args)`.
template <int P, int N, class Launch>
void run_forward(const Launch& launch, const SsdArgs& a) {
  const dim3 chunk_grid(a.nchunks, a.nheads, a.batch);
  launch("ssd_chunk_state_kernel", ssd_chunk_state_kernel<P, N, false>, chunk_grid, kChunkThreads,
         chunk_state_smem_bytes<P, N>(), a);
  launch("ssd_state_passing_kernel", ssd_state_passing_kernel<P, N>, dim3(P * N / kPassElems, a.nheads, a.batch),
         kPassThreads, size_t{0}, a);
  launch("ssd_chunk_scan_kernel", ssd_chunk_scan_kernel<P, N>, chunk_grid, kChunkThreads,
         chunk_scan_smem_bytes<P, N>(), a);
}

}  // namespace sg::kernels::ssd
