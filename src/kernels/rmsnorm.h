#pragma once
// RMSNorm (HF Llama): y = w * (x * rsqrt(mean(x^2) + eps)), statistics in fp32; bf16 activations and
// weights, fp32 rstd, fp32 weight gradient. CPU twin: reference/rmsnorm.h.
//
// Forward layout (kernels/rmsnorm_forward.cuh): one warp per row, 8 rows per block, the row in registers,
// for H <= 1024 on the 16-byte vector path (H % 8 == 0 and every bf16 pointer 16-byte aligned); one thread
// block per row otherwise (wider rows, scalar path).
//
// Backward (kernels/rmsnorm_backward.cuh): a group of warps per row holding the row in registers, a fixed
// number of blocks P = rmsnorm_backward_num_partials(T) (a function of T only) walking the rows in a fixed
// assignment. Deterministic dweight (no float atomics): block b writes its partial sums of dout * x * rstd
// to row b of a caller-provided fp32 scratch [P, H]; a second kernel (partial_sums) sums the P rows per
// column in a fixed order and ADDS the result into the fp32 dweight. Plan the scratch with
// rmsnorm_backward_scratch_bytes(T, H) (the model's arena); it holds nothing between calls. Rows up to
// H = 16384 (vector path) or 8192 (scalar path).
//
// Graph-safe: no allocation, no sync, no host reads of device memory.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "cuda/bf16.h"

namespace sg::kernels {

// Packed rows (rows_per_group, group_stride below): where the T rows of H of the plain norm's [T, H] operands lie.
// By default one after another; with rows_per_group > 1, that many rows side by side in each packed row of
// group_stride elements (qk_layernorm normalizes every query head, or every key head, of the [tokens, qkv_dim]
// projection as a row: rows_per_group = heads, group_stride = qkv_dim). Row r starts at
// (r / rows_per_group) * group_stride + (r % rows_per_group) * H; rstd stays [T]. T must be whole groups. The
// residual forward takes contiguous rows only. (Plain fields, not a struct: designated initializers may omit them.)
struct RmsNormForwardParams {
  bf16* out = nullptr;           // [T, H] (may alias `in`: each thread reads its elements before writing them)
  float* rstd = nullptr;         // [T]: rsqrt(mean(x^2) + eps), saved for the backward
  const bf16* in = nullptr;      // [T, H]
  const bf16* weight = nullptr;  // [H]
  int64_t T = 0, H = 0;
  float eps = 1e-5f;
  int64_t rows_per_group = 1;  // packed rows of out and in (above)
  int64_t group_stride = 0;    // 0: rows_per_group * H
};
void rmsnorm_forward(cudaStream_t stream, const RmsNormForwardParams& p);

// The block's "add & norm" in one pass: residual_out = bf16(residual_in + delta) (sum in fp32, rounded
// once); norm_out = rmsnorm(residual_out) computed from the ROUNDED residual_out, i.e. exactly what
// rmsnorm_forward on the stored residual stream gives, so the backward (which reads residual_out as `in`)
// is consistent. residual_out may alias residual_in (in-place residual stream); nothing else may alias.
struct ResidualRmsNormForwardParams {
  bf16* residual_out = nullptr;      // [T, H]
  bf16* norm_out = nullptr;          // [T, H]
  float* rstd = nullptr;             // [T]
  const bf16* residual_in = nullptr; // [T, H]
  const bf16* delta = nullptr;       // [T, H] (the sublayer output added to the residual stream)
  const bf16* weight = nullptr;      // [H]
  int64_t T = 0, H = 0;
  float eps = 1e-5f;
};
void residual_rmsnorm_forward(cudaStream_t stream, const ResidualRmsNormForwardParams& p);

// din = rmsnorm_backward(dout) [+ dresidual]; dweight += sum_t dout * x * rstd.
// The optional dresidual fuses the residual-stream gradient add (d residual_in = d residual_out + d norm
// input) into this pass; din may alias dresidual or dout (each element is read before it is written by the
// same thread). Nothing else may alias.
struct RmsNormBackwardParams {
  bf16* din = nullptr;               // [T, H], overwritten
  float* dweight = nullptr;          // [H] fp32 main_grad, ADDED into; nullptr: only the partial rows are
                                     // written, left in scratch for the caller's column sums (one launch for
                                     // many norms: add_partial_column_sums_batched, kernels/partial_sums.h)
  float* scratch = nullptr;          // fp32 [rmsnorm_backward_num_partials(T), H]: partial dweight sums
  size_t scratch_bytes = 0;          // size of `scratch` (checked >= rmsnorm_backward_scratch_bytes)
  const bf16* dout = nullptr;        // [T, H]
  const bf16* in = nullptr;          // [T, H], the forward input
  const bf16* weight = nullptr;      // [H]
  const float* rstd = nullptr;       // [T], from the forward
  const bf16* dresidual = nullptr;   // [T, H] or nullptr: added to din
  int64_t T = 0, H = 0;
  int64_t rows_per_group = 1;  // packed rows of din, dout, in and dresidual (above); scratch is [.., H]
  int64_t group_stride = 0;    // 0: rows_per_group * H
};
void rmsnorm_backward(cudaStream_t stream, const RmsNormBackwardParams& p);

// Number of partial-sum rows of the backward's scratch: min(T, 264) (depends on T only, so the order of
// the dweight sums — hence its bits — is fixed for a given shape).
int64_t rmsnorm_backward_num_partials(int64_t T);
// Bytes of fp32 scratch the backward needs: num_partials(T) * H * 4.
size_t rmsnorm_backward_scratch_bytes(int64_t T, int64_t H);

}  // namespace sg::kernels
