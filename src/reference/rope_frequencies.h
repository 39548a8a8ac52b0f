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
// It changes only the frequencies (no attention scaling), so it is a plan-time constant of the step:
// the cos/sin table (kernels::rope_table_build) and the kernel's computed path evaluate it from these
// four numbers.
#include <cmath>
#include <cstdint>

#if defined(__CUDACC__)
#define SG_ROPE_HD __host__ __device__ __forceinline__
#else
#define SG_ROPE_HD inline
#endif

namespace sg::ref {

struct RopeScaling {
  double factor = 0.0;  // 0: no scaling; Llama 3.1: 8, Llama 3.2: 32
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  double original_max_position_embeddings = 8192.0;

  SG_ROPE_HD bool enabled() const { return factor > 0.0; }
  // Off, or 0 < low_freq_factor < high_freq_factor and original_max_position_embeddings > 0.
  SG_ROPE_HD bool valid() const {
    return !enabled() ||
           (low_freq_factor > 0.0 && high_freq_factor > low_freq_factor && original_max_position_embeddings > 0.0);
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
  if (!scaling.enabled()) return inv_freq;
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
