#pragma once
// IEEE binary16 as raw bits on the host (safetensors F16 weights), beside core/bf16_bits.h: one definition for the
// checkpoint reader and the model's views of mapped weights (model/flat_view.h).
#include <cmath>
#include <cstdint>
#include <cstring>

namespace sg {

// binary16 bits -> float: exact (every half value, subnormals, infinities and NaN payloads included).
inline float f16_bits_to_float(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  const uint32_t mantissa = h & 0x3ffu;
  uint32_t bits = 0;
  if (exponent == 0x1f) {
    bits = sign | 0x7f800000u | (mantissa << 13);  // inf, or NaN with its payload
  } else if (exponent != 0) {
    bits = sign | ((exponent + 127 - 15) << 23) | (mantissa << 13);  // normal: rebias the exponent
  } else {
    // Zero or subnormal: mantissa x 2^-24, exact in float (24-bit significand, exponent >= -126).
    const float magnitude = std::ldexp(static_cast<float>(mantissa), -24);
    return sign != 0 ? -magnitude : magnitude;
  }
  float f = 0.0f;
  std::memcpy(&f, &bits, 4);
  return f;
}

}  // namespace sg
