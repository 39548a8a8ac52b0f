#pragma once
// CPU fp32 reference of causal grouped-query attention on the fused QKV activation: the ground truth
// for kernels/attention.h and the CPU backend.
//
// Layout. B sequences of S tokens, T = B*S rows. A QKV row is [q heads (heads*d) | k heads (kv_heads*d) |
// v heads (kv_heads*d)], so its width is qkv = (heads + 2*kv_heads)*d; each head's d values are
// contiguous. Token t is position t % S of sequence t / S. Query head h uses kv head
// h / (heads / kv_heads) (heads must be a multiple of kv_heads).
//
// Math, per sequence b, head h, query i, key j <= i (causal):
//   s_ij = (q_i . k_j) / sqrt(d)
//   lse_i = log(sum_{j<=i} exp(s_ij))          (natural log; fp32 "softmax stats", as cuDNN's Stats)
//   p_ij = exp(s_ij - lse_i)
//   out_i = sum_j z_ij v_j,  z_ij = p_ij * keep_ij / (1 - p)    (z = p when dropout_p == 0)
// Dropout on the attention probabilities: keep_ij iff
//   rng::philox_uniform(state.seed, state.offset, site, ((b*heads + h)*S + i)*S + j) >= dropout_p.
// The GPU path (cuDNN fused attention) draws its mask from cuDNN's own Philox stream, so CPU and GPU
// agree only at dropout_p == 0; with dropout the two are compared only statistically / by their own
// consistency (forward mask reused in backward).
#include <cstdint>

#include "core/philox.h"

namespace sg::ref {

// out [T, heads*d] (overwritten), lse [B, heads, S] (overwritten), qkv [T, (heads+2*kv_heads)*d].
void attention_forward(float* out, float* lse, const float* qkv, int64_t B, int64_t S, int64_t heads,
                       int64_t kv_heads, int64_t d, float dropout_p, rng::RngState state, uint32_t site);

// dqkv [T, (heads+2*kv_heads)*d] (overwritten: dq, dk, dv parts all written), dout [T, heads*d],
// and out/lse as written by attention_forward with the same inputs, dropout_p, state and site.
void attention_backward(float* dqkv, const float* dout, const float* qkv, const float* out,
                        const float* lse, int64_t B, int64_t S, int64_t heads, int64_t kv_heads, int64_t d,
                        float dropout_p, rng::RngState state, uint32_t site);

}  // namespace sg::ref
