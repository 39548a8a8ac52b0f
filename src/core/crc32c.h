#pragma once
// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum of TFRecord framing that
// TensorBoard event files use. Debian 12 packages no CRC-32C library (google/crc32c came later), and
// the table form is a dozen lines: tests/core/crc32c_test.cpp checks it against RFC 3720's vectors.
#include <cstddef>
#include <cstdint>

namespace sg {

uint32_t crc32c(const void* data, size_t size);

// TFRecord's "masked" CRC: rotate right by 15 and add 0xa282ead8, so a CRC of data that itself holds
// CRCs does not degenerate.
inline uint32_t masked_crc32c(const void* data, size_t size) {
  const uint32_t crc = crc32c(data, size);
  return ((crc >> 15) | (crc << 17)) + 0xa282ead8u;
}

}  // namespace sg
