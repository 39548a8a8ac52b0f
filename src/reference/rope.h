#pragma once
// CPU fp32 twin of src/kernels/rope: Hugging Face rotate-half rotary embedding, in place.
// For head dim d and i < d/2: freq_i = rope_inv_freq(i, d, base, scaling) (reference/rope_frequencies.h:
// base^(-2i/d) unless Llama 3 or LongRoPE scaling is on), angle = pos * freq_i;
// out[i] = x[i] cos - x[i+d/2] sin; out[i+d/2] = x[i+d/2] cos + x[i] sin, with cos and sin times LongRoPE's
// attention_factor (1 otherwise).
// Partial rotary (rotary_dim > 0, even, <= head_dim): d = rotary_dim, the pairs (i, i + d/2) of each head's first
// d dimensions rotated and its other head_dim - d dimensions left as they are (HF Phi3's q_rot / q_pass, Megatron's
// rotary_percent). 0: d = head_dim.
// Positions: row t is at t % S (training: T = B*S rows of B sequences), or at positions[t] when
// `positions` is given (decoding: each row its own place in its sequence; S is then unused).
#include <cstdint>

#include "reference/rope_frequencies.h"

namespace sg::ref {

// sg::Error naming `op` unless `scaling` is valid (RopeScaling::valid) and, with LongRoPE, has one factor for each of
// the rotated_dims / 2 pairs. The kernels (kernels/rope.h, the decoding linear's QKV epilogue) check with it too.
void check_rope_scaling(const char* op, const RopeScaling& scaling, int64_t rotated_dims);

// Rotates num_heads heads of head_dim starting at x in each of T rows; rows are row_stride floats apart
// (so q or k inside a fused QKV row can be rotated by pointing x at its first head).
void rope_forward(float* x, int64_t T, int64_t S, int64_t num_heads, int64_t head_dim, int64_t row_stride, double base,
                  const RopeScaling& scaling = {}, const int32_t* positions = nullptr, int64_t rotary_dim = 0);

// The gradient of rope_forward: the transposed rotation (the inverse, times LongRoPE's attention_factor squared where
// it is not 1), in place on dx.
void rope_backward(float* dx, int64_t T, int64_t S, int64_t num_heads, int64_t head_dim, int64_t row_stride,
                   double base, const RopeScaling& scaling = {}, const int32_t* positions = nullptr,
                   int64_t rotary_dim = 0);

// CPU twin of kernels::rope_table_build: cos_sin[pos][0][i] = a cos(pos * freq_i), cos_sin[pos][1][i] =
// a sin(pos * freq_i) (a: attention_factor) for pos < positions and i < head_dim / 2 (head_dim: the dimensions
// rotated, d above), angles in double, rounded to fp32 (the values rope_forward above rounds to its working type).
void rope_cos_sin_table(float* cos_sin, int64_t positions, int64_t head_dim, double base,
                        const RopeScaling& scaling = {});

// Scalar-generic twins (float and double instantiated) for fp64 gradient checks.
template <class Real>
void rope_forward_generic(Real* x, int64_t T, int64_t S, int64_t num_heads, int64_t head_dim, int64_t row_stride,
                          double base, const RopeScaling& scaling = {}, const int32_t* positions = nullptr,
                          int64_t rotary_dim = 0);
template <class Real>
void rope_backward_generic(Real* dx, int64_t T, int64_t S, int64_t num_heads, int64_t head_dim, int64_t row_stride,
                           double base, const RopeScaling& scaling = {}, const int32_t* positions = nullptr,
                           int64_t rotary_dim = 0);

}  // namespace sg::ref
