#pragma once
// bf16 as raw bits on the host, without CUDA headers, so the CPU twins (reference/) can round as the
// device does. cuda/bf16.h re-exports these next to the device type.
#include <cstdint>
#include <cstring>

namespace sg {

// Round-to-nearest-even fp32 -> bf16 and back, bit-identical to __float2bfloat16.
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
// fp32 rounded to the nearest bf16 value, kept as fp32.
inline float round_to_bf16(float f) { return bf16_bits_to_float(float_to_bf16_bits(f)); }

}  // namespace sg
