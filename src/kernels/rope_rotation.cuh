#pragma once
// The rotation of one RoPE pair (kernels/rope.h), shared by the RoPE kernels (rope.cuh) and the decoding linear's
// QKV epilogue (decode_linear.cuh), so the two give the same bits. Device helpers only (no kernel), emulator-safe.
#include <cmath>
#include <cstdint>

#include "kernels/common.cuh"

namespace sg::kernels::rope {
SG_EMULATED_NAMESPACE_BEGIN

// cos and sin of pos * inv_freq times `scale` (LongRoPE's attention_factor, else 1, which changes no bit): the fp64
// angle, sincos and product, rounded to fp32, that the table and the computed path share (one definition, so both
// give the same bits).
SG_DEVICE void cos_sin(int64_t pos, double inv_freq, double scale, float& c, float& s) {
  const double angle = static_cast<double>(pos) * inv_freq;
  double sd, cd;
  sincos(angle, &sd, &cd);
  c = static_cast<float>(cd * scale);
  s = static_cast<float>(sd * scale);
}

// out1 = x1 cos - x2 sin and out2 = x2 cos + x1 sin, with the contraction nvcc gave the per-element
// kernel's plain expressions (its SASS: FFMA(x1, cos, -FMUL(x2, sin)) and FFMA(x1, sin, FMUL(x2, cos)), in
// forward and backward alike). Spelled out, because which product nvcc fuses depends on the surrounding
// code: left to the compiler, the tiled kernel fused x2 cos instead, and would differ in the last bit.
SG_DEVICE void rotate(float x1, float x2, float c, float s, float& out1, float& out2) {
  out1 = detail::fma_rn(x1, c, -detail::mul_rn(x2, s));
  out2 = detail::fma_rn(x1, s, detail::mul_rn(x2, c));
}

SG_EMULATED_NAMESPACE_END
}  // namespace sg::kernels::rope
