#pragma once
// The Mamba2 SSD scan (selective state space, A = a_h * identity per head), chunked, on tensor cores.
// CPU twin: reference/ssd_scan.h (the sequential recurrence).
//
//   y[b,t,h,:] = sum_{s<=t} (C_t . B_s) exp(sum_{r=s+1..t} dt_r A_h) dt_s x_s + D_h x_t
//
// with head h reading group g = h / (nheads / ngroups) of B and C. Chunks of kSsdChunk = 128 tokens:
//   1. per chunk: cumsum of dt*A (fp32) and the chunk's own final state  S_c = sum_s exp(cum_last - cum_s) dt_s x_s B_s^T
//   2. state passing, sequential over chunks in fp32: H_0 = 0, H_{c+1} = exp(cum_last_c) H_c + S_c
//   3. per chunk: y = (C B^T o causal decay o dt) x  +  exp(cum_t) C_t H_c  +  D x
// The backward recomputes 1-2, then runs the same decomposition in reverse (state gradients passed from the
// last chunk to the first) and writes dx, ddt, dA, dB, dC, dD. Every reduction (dB/dC over the heads of a
// group, dA/dD over batch and chunks, the dcumsum scans) has a fixed order and there are no atomics: runs
// and CUDA-graph replays are bitwise identical.
//
// Precision: fp32 cumsums, states, state passing and accumulation; bf16 tensor-core operands (the inputs,
// the decayed intra-chunk matrix, and the passed states / state gradients as read by the chunk matmuls,
// as mamba_ssm's Triton kernels do). Outputs: y, dx, dB, dC bf16 (they feed bf16 activations); ddt, dA,
// dD fp32.
//
// Memory: everything between the kernels lives in the caller's workspace of ssd_workspace_bytes(shape)
// bytes (plan time); it holds nothing between calls, so forward and backward (and all layers) may share
// one. No allocation, no host sync: graph-safe.
//
// Layout: x [B, S, H, P] and y, dy, dx alike; Bm, Cm, dBm, dCm [B, S, G, N]; dt, ddt [B, S, H] fp32;
// A, D, dA, dD [H] fp32. The *_row_stride fields give the elements between consecutive tokens of a tensor
// (0 = packed: H*P or G*N), so x, B and C may be column slices of one conv output row and dx, dB, dC may be
// written into one gradient row. Row strides must be multiples of 8 and bf16 pointers 16-byte aligned.
// Supported: headdim 64; dstate 16, 32, 64 or 128; nheads a multiple of ngroups.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "cuda/bf16.h"
#include "kernels/shape_limits.h"  // kSsdChunk, the supported headdim and dstate

namespace sg::kernels {

struct SsdShape {
  int64_t batch = 0, seqlen = 0, nheads = 0, headdim = 0, ngroups = 0, dstate = 0;
};

// Bytes of workspace the forward and the backward need (the backward's need, the larger; a pure function
// of the shape). Throws for an unsupported shape.
size_t ssd_workspace_bytes(const SsdShape& shape);

struct SsdScanForwardParams {
  bf16* y = nullptr;             // [B, S, H, P]
  const bf16* x = nullptr;       // [B, S, H, P]
  const float* dt = nullptr;     // [B, S, H], already softplus'ed / clamped
  const float* A = nullptr;      // [H], negative
  const bf16* Bm = nullptr;      // [B, S, G, N]
  const bf16* Cm = nullptr;      // [B, S, G, N]
  const float* D = nullptr;      // [H] or nullptr (no skip)
  void* workspace = nullptr;     // ssd_workspace_bytes(shape) bytes, 256-byte aligned
  size_t workspace_bytes = 0;
  SsdShape shape;
  int64_t x_row_stride = 0, bm_row_stride = 0, cm_row_stride = 0, y_row_stride = 0;
};
void ssd_scan_forward(cudaStream_t stream, const SsdScanForwardParams& p);

// Gradients are OVERWRITTEN (dA and dD too: the caller chains dA through A = -exp(A_log) and adds).
struct SsdScanBackwardParams {
  bf16* dx = nullptr;            // [B, S, H, P]
  float* ddt = nullptr;          // [B, S, H]
  float* dA = nullptr;           // [H]
  bf16* dBm = nullptr;           // [B, S, G, N]
  bf16* dCm = nullptr;           // [B, S, G, N]
  float* dD = nullptr;           // [H]; may be nullptr only when D is
  const bf16* dy = nullptr;      // [B, S, H, P]
  const bf16* x = nullptr;
  const float* dt = nullptr;
  const float* A = nullptr;
  const bf16* Bm = nullptr;
  const bf16* Cm = nullptr;
  const float* D = nullptr;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  SsdShape shape;
  int64_t x_row_stride = 0, bm_row_stride = 0, cm_row_stride = 0, dy_row_stride = 0;
  int64_t dx_row_stride = 0, dbm_row_stride = 0, dcm_row_stride = 0;
};
void ssd_scan_backward(cudaStream_t stream, const SsdScanBackwardParams& p);

}  // namespace sg::kernels
