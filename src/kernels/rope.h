#pragma once
// Rotary position embedding (HF rotate-half), in place on bf16 activations. CPU twin: reference/rope.h.
// For head dim d and pair i < d/2: freq_i = rope_inv_freq(i, d, base, scaling) (base^(-2i/d), or the Llama 3 or
// LongRoPE scaled frequency: reference/rope_frequencies.h), angle = pos * freq_i with pos = t % S, or
// pos = positions[t] read from device memory when `positions` is given (decoding: one graph serves
// every step because the positions are read at run time);
// out[i] = x1 cos - x2 sin, out[i + d/2] = x2 cos + x1 sin (x1 = x[i], x2 = x[i + d/2]); math in fp32; cos and sin
// times LongRoPE's attention_factor (1 otherwise).
// Partial rotary (RopeParams::rotary_dim): d is the rotated dimensions at the start of each head, the rest of the
// head untouched.
// cos/sin come from the position in fp64 (like the reference, then rounded to fp32), either
//   * read from a RopeTable (the training step: positions t % S), built once by rope_table_build with the
//     kernel's own fp64 angle and sincos, so the output is bit for bit that of computing them; or
//   * computed in the kernel, once per (row, pair) into the shared memory of the block whose tile holds
//     the row (decoding: positions from device memory, unbounded at plan time).
// Both reuse cos/sin across the heads (design: kernels/rope.cuh). head_dim <= 4096.
//
// Use on the fused QKV activation: point x at the row's first q head with num_heads = nq + nkv (q and k
// heads are contiguous), row_stride = the QKV row width; the v heads are not touched.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "cuda/bf16.h"
#include "reference/rope_frequencies.h"

namespace sg::kernels {

// cos and sin of every (position, pair) of one RoPE configuration, rounded to fp32. The table only
// describes memory filled by rope_table_build; RopeParams::table points the kernel at it.
struct RopeTable {
  const float* cos_sin = nullptr;  // device [positions][2][head_dim / 2]: per position its cos row, then sin row
  int64_t positions = 0;           // positions 0 .. positions - 1
  int64_t head_dim = 0;            // the dimensions rotated (RopeParams' rotary_dim where set)
  double base = 0.0;
  ref::RopeScaling scaling{};
};

struct RopeTableParams {
  float* cos_sin = nullptr;  // device, rope_table_bytes(positions, head_dim), 16-byte aligned; overwritten
  int64_t positions = 0;     // > 0 and < 2^31
  int64_t head_dim = 0;      // even, <= 4096: the dimensions rotated (RopeParams' rotary_dim where set)
  double base = 10000.0;
  ref::RopeScaling scaling{};
};
size_t rope_table_bytes(int64_t positions, int64_t head_dim);
// Fills p.cos_sin on `stream` (cos and sin of pos * rope_inv_freq(i) in fp64, rounded to fp32; CPU twin:
// ref::rope_cos_sin_table) and returns the table that rope_forward / rope_backward read.
RopeTable rope_table_build(cudaStream_t stream, const RopeTableParams& p);

struct RopeParams {
  bf16* x = nullptr;          // first head of row 0; rows row_stride elements apart; updated in place
  int64_t T = 0;              // rows (tokens)
  int64_t S = 0;              // sequence length: row t is at position t % S
  int64_t num_heads = 0;      // consecutive heads rotated per row
  int64_t head_dim = 0;       // even
  int64_t rotary_dim = 0;     // dimensions rotated at the start of each head: even, <= head_dim; 0: all of them
  int64_t row_stride = 0;     // elements, >= num_heads * head_dim
  double base = 10000.0;      // rotary_base (rope_theta)
  ref::RopeScaling scaling{};          // Llama 3 or LongRoPE scaling (reference/rope_frequencies.h); the default: none
  const int32_t* positions = nullptr;  // device [T]: row t's position; nullptr: t % S
  // cos_sin set: cos/sin read from this table instead of computed (positions must be null, S <= its
  // positions, its head_dim the dimensions rotated, and its base and scaling those above; checked).
  RopeTable table{};
};
// Rotates by +angle (forward).
void rope_forward(cudaStream_t stream, const RopeParams& p);
// Rotates by -angle: the gradient of rope_forward, applied in place to dx (p.x).
void rope_backward(cudaStream_t stream, const RopeParams& p);

}  // namespace sg::kernels
