#include "reference/weight_fingerprint.h"

#include <algorithm>
#include <cstring>

#include "core/error.h"
#include "core/strings.h"

namespace sg::ref {

void weight_fingerprints(const void* data, int element_bytes, int64_t count, int64_t chunk_elements, uint64_t* out) {
  SG_CHECK(element_bytes == 2 || element_bytes == 4,
           strprintf("weight_fingerprints: %d-byte elements (2 or 4)", element_bytes));
  SG_CHECK(count >= 0 && chunk_elements > 0, "weight_fingerprints: a negative count or an empty chunk");
  const auto* bytes = static_cast<const unsigned char*>(data);
  for (int64_t c = 0; c < fingerprint_chunks(count, chunk_elements); ++c) {
    uint64_t sum = 0;
    const int64_t end = std::min(count, (c + 1) * chunk_elements);
    for (int64_t i = c * chunk_elements; i < end; ++i) {
      uint32_t bits = 0;
      if (element_bytes == 2) {
        uint16_t half = 0;
        std::memcpy(&half, bytes + i * 2, 2);
        bits = half;
      } else {
        std::memcpy(&bits, bytes + i * 4, 4);
      }
      sum += fingerprint_mix(bits, static_cast<uint64_t>(i));
    }
    out[c] = sum;
  }
}

uint64_t fingerprint_digest(const std::vector<uint64_t>& fingerprints) {
  uint64_t sum = 0;
  for (size_t c = 0; c < fingerprints.size(); ++c) sum += fingerprint_mix(fingerprints[c], c);
  return sum;
}

}  // namespace sg::ref
