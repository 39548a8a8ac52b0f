#pragma once
// CPU twin of a CUDA memset node (and of src/graph/memset_nodes' fill kernel that replaces it):
// `height` rows, `pitch` bytes apart, of `width` elements of `element_size` (1, 2 or 4) bytes, each
// element the low `element_size` bytes of `value`, little-endian.
#include <cstddef>
#include <cstdint>

namespace sg::ref {

void memset_elements(unsigned char* dst, size_t pitch, uint32_t value, unsigned element_size, size_t width,
                     size_t height);

}  // namespace sg::ref
