#include "reference/memset.h"

namespace sg::ref {

void memset_elements(unsigned char* dst, size_t pitch, uint32_t value, unsigned element_size, size_t width,
                     size_t height) {
  for (size_t r = 0; r < height; ++r) {
    unsigned char* row = dst + r * pitch;
    for (size_t e = 0; e < width; ++e) {
      for (unsigned k = 0; k < element_size; ++k) {
        row[e * element_size + k] = static_cast<unsigned char>(value >> (8u * k));
      }
    }
  }
}

}  // namespace sg::ref
