#pragma once
// The Mamba2 mixer's per-head time step and decay (CPU twin: reference/mamba_dt.h):
//   dt[t, h] = clamp(softplus(dt_raw[t, h] + dt_bias[h]), dt_min, dt_max)   fp32 out [T, H], T = B * S
//   A[h] = -exp(A_log[h])
// softplus is mamba_ssm's (identity above 20); [dt_min, dt_max] is Megatron's dt_limit, default (0, inf).
// dt_raw is the bf16 dt slice of the in_proj output row (token t at dt_raw + t * dt_raw_row_stride, 0 =
// packed); the backward writes d dt_raw into the same kind of view of the in_proj output gradient (only its
// H columns). Kernels: mamba_dt.cuh (also run by the CPU emulator of the tests).
// dt_bias and A_log are read in fp32 (pass the fp32 main weights): bf16 would put ~3% of error on dt and A.
//
// Deterministic d dt_bias (no float atomics): a fixed number of token slots (a function of T) each sum
// their tokens' contributions in registers; the 8 slots of a block are added in order into one partial row
// of the scratch [mamba_dt_backward_num_partials(T), H], whose rows are then added in order into the fp32
// main-grad (kernels/partial_sums.h). The gradient of dt_bias is the sum of the fp32 (unrounded) d dt_raw.
// Graph-safe: no allocation, no sync, no host reads of device memory.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <limits>

#include "cuda/bf16.h"
#include "kernels/float_buffer.h"

namespace sg::kernels {

struct MambaDtForwardParams {
  float* dt = nullptr;             // [T, H] fp32
  const bf16* dt_raw = nullptr;    // token t at dt_raw + t * dt_raw_row_stride
  const float* dt_bias = nullptr;  // [H] fp32
  int64_t T = 0, H = 0;
  int64_t dt_raw_row_stride = 0;   // 0 (packed, H) or >= H
  float dt_min = 0.0f;             // dt_limit
  float dt_max = std::numeric_limits<float>::infinity();
};
void mamba_dt_forward(cudaStream_t stream, const MambaDtForwardParams& p);

// ddt_raw = ddt * [not clipped] * softplus'(dt_raw + dt_bias) (its H columns OVERWRITTEN);
// ddt_bias += sum over tokens of the same. ddt_raw must not alias dt_raw.
struct MambaDtBackwardParams {
  bf16* ddt_raw = nullptr;         // token t at ddt_raw + t * ddt_raw_row_stride
  FloatBuffer ddt_bias;            // [H] main_grad (fp32 or bf16), ADDED into
  float* scratch = nullptr;        // fp32 [mamba_dt_backward_num_partials(T), H]
  size_t scratch_bytes = 0;        // size of `scratch` (checked >= mamba_dt_backward_scratch_bytes)
  const float* ddt = nullptr;      // [T, H] fp32 (from the scan's backward)
  const bf16* dt_raw = nullptr;    // the forward input (strided, dt_raw_row_stride)
  const float* dt_bias = nullptr;  // [H]
  int64_t T = 0, H = 0;
  int64_t dt_raw_row_stride = 0;   // 0 (packed) or >= H
  int64_t ddt_raw_row_stride = 0;  // 0 (packed) or >= H
  float dt_min = 0.0f;
  float dt_max = std::numeric_limits<float>::infinity();
};
void mamba_dt_backward(cudaStream_t stream, const MambaDtBackwardParams& p);

int64_t mamba_dt_backward_num_partials(int64_t T);  // 0 when T == 0
size_t mamba_dt_backward_scratch_bytes(int64_t T, int64_t H);

// A = -exp(A_log), fp32 [H].
struct MambaAForwardParams {
  float* A = nullptr;
  const float* A_log = nullptr;
  int64_t H = 0;
};
void mamba_a_forward(cudaStream_t stream, const MambaAForwardParams& p);

// dA_log += dA * A, with A = -exp(A_log) recomputed (dA from the scan's backward, already reduced).
struct MambaABackwardParams {
  FloatBuffer dA_log;              // [H] main_grad (fp32 or bf16, kernels/float_buffer.h), ADDED into
  const float* dA = nullptr;       // [H]
  const float* A_log = nullptr;    // [H]
  int64_t H = 0;
};
void mamba_a_backward(cudaStream_t stream, const MambaABackwardParams& p);

}  // namespace sg::kernels
