#pragma once
// RoPE frequencies, shared by the CPU twin (reference/rope.h) and the GPU kernel (kernels/rope.h) like
// core/philox.h: one definition, __host__ __device__, evaluated in fp64.
//
// d is the number of dimensions rotated: the whole head, or with partial rotary (Megatron's rotary_percent, HF's
// partial_rotary_factor) its first rotary_dim dimensions, the rest passed through (rope_rotated_dims).
// Unscaled (HF "default"): inv_freq_i = base^(-2i/d) for pair i < d/2.
// Llama 3 scaling (HF rope_type "llama3", Megatron's apply_rope_scaling; factor > 0 turns it on), with
// wavelen = 2 pi / inv_freq, low = original_max_position_embeddings / low_freq_factor and
// high = original_max_position_embeddings / high_freq_factor:
//   wavelen < high                 inv_freq                         (high frequencies kept)
//   wavelen > low                  inv_freq / factor                (low frequencies stretched)
//   otherwise                      (1 - s) inv_freq / factor + s inv_freq,
//                                  s = (original_max_position_embeddings / wavelen - low_freq_factor)
//                                      / (high_freq_factor - low_freq_factor)
// Phi-3's LongRoPE (HF rope_type "longrope"; longrope_pairs > 0 turns it on): inv_freq_i = base^(-2i/d) / f_i with
// one factor f_i per pair (a folder's short_factor or long_factor list, chosen by the caller that knows the sequence
// length), and cos and sin multiplied by attention_factor (transformers' attention_scaling), which scales every query
// and key, so each attention logit by its square.
// Both are plan-time constants of the step: the cos/sin table (kernels::rope_table_build) and the kernel's
// computed path evaluate them from these numbers.
#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define SG_ROPE_HD __host__ __device__ __forceinline__
#else
#define SG_ROPE_HD inline
#endif

namespace sg::ref {

// LongRoPE's factors travel inside RopeScaling (kernel parameters, no device buffer): at most this many pairs, so
// rotated dimensions up to 256 (Phi-3 and Phi-4-mini rotate 96).
inline constexpr int kMaxLongRopePairs = 128;

struct RopeScaling {
  double factor = 0.0;  // Llama 3 (> 0 turns it on); Llama 3.1: 8, Llama 3.2: 32
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  double original_max_position_embeddings = 8192.0;
  // LongRoPE: the count of factors in use (the rotated dimensions / 2), 0 off; fp32 like transformers' tensor.
  int32_t longrope_pairs = 0;
  float longrope_factors[kMaxLongRopePairs] = {};
  double attention_factor = 1.0;  // multiplies cos and sin; 1 except with LongRoPE

  SG_ROPE_HD bool llama3() const { return factor > 0.0; }
  SG_ROPE_HD bool longrope() const { return longrope_pairs > 0; }
  // Llama 3 and LongRoPE not both; Llama 3: 0 < low_freq_factor < high_freq_factor and
  // original_max_position_embeddings > 0; LongRoPE: at most kMaxLongRopePairs factors, each positive and finite;
  // attention_factor positive and finite.
  SG_ROPE_HD bool valid() const {
    const double kMax = 1.7976931348623157e308;  // NaN fails every comparison, infinity this one
    if (!(attention_factor > 0.0 && attention_factor <= kMax)) return false;
    if (longrope()) {
      if (llama3() || longrope_pairs > kMaxLongRopePairs) return false;
      for (int i = 0; i < longrope_pairs; ++i) {
        if (!(longrope_factors[i] > 0.0f && static_cast<double>(longrope_factors[i]) <= kMax)) return false;
      }
    }
    return !llama3() ||
           (low_freq_factor > 0.0 && high_freq_factor > low_freq_factor && original_max_position_embeddings > 0.0);
  }
  // LongRoPE has one factor per rotated pair: d = 2 x longrope_pairs.
  SG_ROPE_HD bool fits(int64_t rotated_dims) const {
    return !longrope() || 2 * int64_t{longrope_pairs} == rotated_dims;
  }
  // The same frequencies and cos/sin (unused LongRoPE slots ignored): a table built for one serves the other.
  SG_ROPE_HD bool same_as(const RopeScaling& o) const {
    if (factor != o.factor || low_freq_factor != o.low_freq_factor || high_freq_factor != o.high_freq_factor ||
        original_max_position_embeddings != o.original_max_position_embeddings || longrope_pairs != o.longrope_pairs ||
        attention_factor != o.attention_factor) {
      return false;
    }
    for (int i = 0; i < longrope_pairs && i < kMaxLongRopePairs; ++i) {
      if (longrope_factors[i] != o.longrope_factors[i]) return false;
    }
    return true;
  }
};

// The dimensions rotated at the start of each head: rotary_dim, or (0) the whole head.
SG_ROPE_HD int64_t rope_rotated_dims(int64_t head_dim, int64_t rotary_dim) {
  return rotary_dim > 0 ? rotary_dim : head_dim;
}
// rotary_dim 0 (the whole head), or even, positive and at most head_dim: the pairs (i, i + rotary_dim/2) fit a head.
SG_ROPE_HD bool rope_rotary_dim_valid(int64_t head_dim, int64_t rotary_dim) {
  return rotary_dim == 0 || (rotary_dim > 0 && rotary_dim % 2 == 0 && rotary_dim <= head_dim);
}

SG_ROPE_HD double rope_inv_freq(int64_t pair, int64_t head_dim, double base, const RopeScaling& scaling) {
  const double inv_freq = pow(base, -2.0 * static_cast<double>(pair) / static_cast<double>(head_dim));
  if (scaling.longrope()) return inv_freq / static_cast<double>(scaling.longrope_factors[pair]);
  if (!scaling.llama3()) return inv_freq;
  const double two_pi = 6.283185307179586476925286766559;
  const double wavelen = two_pi / inv_freq;
  const double low_wavelen = scaling.original_max_position_embeddings / scaling.low_freq_factor;
  const double high_wavelen = scaling.original_max_position_embeddings / scaling.high_freq_factor;
  if (wavelen < high_wavelen) return inv_freq;
  if (wavelen > low_wavelen) return inv_freq / scaling.factor;
  const double smooth = (scaling.original_max_position_embeddings / wavelen - scaling.low_freq_factor) /
                        (scaling.high_freq_factor - scaling.low_freq_factor);
  return (1.0 - smooth) * inv_freq / scaling.factor + smooth * inv_freq;
}

}  // namespace sg::ref

#undef SG_ROPE_HD
