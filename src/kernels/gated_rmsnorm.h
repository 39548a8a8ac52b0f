#pragma once
// The Mamba2 mixer's gated, grouped RMSNorm, norm AFTER the gate (Megatron's norm_before_gate=False):
//   g = y * silu(z);  per group of gs = D / G consecutive columns: rstd = rsqrt(mean(g^2) + eps);
//   out = weight * (g * rstd)
// y [T, D] (the scan output), z the strided z slice of the in_proj output row (token t at
// z + t * z_row_stride, 0 = packed), weight [D]; bf16 activations and weight, fp32 statistics, bf16 out,
// fp32 rstd [T, G] saved for the backward. CPU twin: reference/gated_rmsnorm.h.
//
// Layout: one thread block per (token, group) in the forward (16-byte vectors when gs, the strides and the
// pointers allow; scalar otherwise). The backward recomputes g from y and z. Kernels: gated_rmsnorm.cuh
// (also run by the CPU emulator of the tests).
//
// Deterministic dweight (no float atomics): the backward runs gated_rmsnorm_backward_num_partials(T) x G
// blocks; block (r, g) owns tokens r, r + P, ... of group g, sums its dout * g * rstd in shared memory and
// writes them to row r of the fp32 scratch [P, D]; the rows are then added in a fixed order into the fp32
// dweight (kernels/partial_sums.h). Plan the scratch with gated_rmsnorm_backward_scratch_bytes (the model's
// arena). Graph-safe: no allocation, no sync, no host reads of device memory (for gs > 12256 the backward
// raises its kernel's shared-memory limit once with cudaFuncSetAttribute, a host-side attribute; gs is at most
// kGatedRmsNormMaxGroupWidth = 58080, kernels/shape_limits.h).
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "cuda/bf16.h"
#include "kernels/float_buffer.h"

namespace sg::kernels {

struct GatedRmsNormForwardParams {
  bf16* out = nullptr;           // [T, D]
  float* rstd = nullptr;         // [T, G]
  const bf16* y = nullptr;       // [T, D]
  const bf16* z = nullptr;       // token t at z + t * z_row_stride; D columns read
  const bf16* weight = nullptr;  // [D]
  int64_t T = 0, D = 0, G = 1;   // G groups of D / G columns (mamba_num_groups)
  int64_t z_row_stride = 0;      // 0 (packed, D) or >= D
  float eps = 1e-5f;
};
void gated_rmsnorm_forward(cudaStream_t stream, const GatedRmsNormForwardParams& p);

// dy, dz (the D columns of every token of the strided view, OVERWRITTEN); dweight ADDED into.
// dy may alias dout (each element is read before the same thread writes it); nothing else may alias.
struct GatedRmsNormBackwardParams {
  bf16* dy = nullptr;            // [T, D]
  bf16* dz = nullptr;            // token t at dz + t * dz_row_stride
  FloatBuffer dweight;           // [D] main_grad (fp32 or bf16, kernels/float_buffer.h), ADDED into
  float* scratch = nullptr;      // fp32 [gated_rmsnorm_backward_num_partials(T), D]
  size_t scratch_bytes = 0;      // size of `scratch` (checked >= gated_rmsnorm_backward_scratch_bytes)
  const bf16* dout = nullptr;    // [T, D]
  const bf16* y = nullptr;       // [T, D], the forward input
  const bf16* z = nullptr;       // the forward gate (strided, z_row_stride)
  const bf16* weight = nullptr;  // [D]
  const float* rstd = nullptr;   // [T, G], from the forward
  int64_t T = 0, D = 0, G = 1;
  int64_t z_row_stride = 0;      // 0 (packed) or >= D
  int64_t dz_row_stride = 0;     // 0 (packed) or >= D
};
void gated_rmsnorm_backward(cudaStream_t stream, const GatedRmsNormBackwardParams& p);

// min(T, 256): depends on T only, so the order of the dweight sums (hence its bits) is fixed for a shape.
int64_t gated_rmsnorm_backward_num_partials(int64_t T);
// Throws sg::Error when the backward cannot run G groups of D / G columns (kernels/shape_limits.h: the shared
// memory of a group), so a model that wide fails when it plans its scratch, not at its first backward.
size_t gated_rmsnorm_backward_scratch_bytes(int64_t T, int64_t D, int64_t G);

}  // namespace sg::kernels
