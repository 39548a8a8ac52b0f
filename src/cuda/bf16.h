#pragma once
// The compute dtype. Host code may include this (cuda_bf16.h has host conversions).
#include <cuda_bf16.h>

#include <cstdint>
#include <cstring>

namespace sg {

using bf16 = __nv_bfloat16;

// Round-to-nearest-even fp32 -> bf16 and back on the host, bit-identical to __float2bfloat16.
inline uint16_t float_to_bf16_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}
inline float bf16_bits_to_float(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

}  // namespace sg
