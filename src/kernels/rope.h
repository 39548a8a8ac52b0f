#pragma once
// Rotary position embedding (HF rotate-half), in place on bf16 activations. CPU twin: reference/rope.h.
// For head dim d and pair i < d/2: freq_i = rope_inv_freq(i, d, base, scaling) (base^(-2i/d), or the
// Llama 3 scaled frequency: reference/rope_frequencies.h), angle = pos * freq_i with pos = t % S, or
// pos = positions[t] read from device memory when `positions` is given (decoding: one graph serves
// every step because the positions are read at run time);
// out[i] = x1 cos - x2 sin, out[i + d/2] = x2 cos + x1 sin (x1 = x[i], x2 = x[i + d/2]); math in fp32.
// cos/sin are computed in the kernel from the position in fp64 (like the reference, then rounded to
// fp32), once per (row, pair) into the shared memory of the block whose tile holds the row, and reused
// across the heads, so no table has to be planned (design: kernels/rope.cuh). head_dim <= 4096.
//
// Use on the fused QKV activation: point x at the row's first q head with num_heads = nq + nkv (q and k
// heads are contiguous), row_stride = the QKV row width; the v heads are not touched.
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/bf16.h"
#include "reference/rope_frequencies.h"

namespace sg::kernels {

struct RopeParams {
  bf16* x = nullptr;          // first head of row 0; rows row_stride elements apart; updated in place
  int64_t T = 0;              // rows (tokens)
  int64_t S = 0;              // sequence length: row t is at position t % S
  int64_t num_heads = 0;      // consecutive heads rotated per row
  int64_t head_dim = 0;       // even
  int64_t row_stride = 0;     // elements, >= num_heads * head_dim
  double base = 10000.0;      // rotary_base (rope_theta)
  ref::RopeScaling scaling{};  // Llama 3 frequency scaling; factor 0 (the default) = none
  const int32_t* positions = nullptr;  // device [T]: row t's position; nullptr: t % S
};
// Rotates by +angle (forward).
void rope_forward(cudaStream_t stream, const RopeParams& p);
// Rotates by -angle: the gradient of rope_forward, applied in place to dx (p.x).
void rope_backward(cudaStream_t stream, const RopeParams& p);

}  // namespace sg::kernels
