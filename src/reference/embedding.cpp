#include "reference/embedding.h"

#include <cstring>

namespace sg::ref {

void embedding_forward(float* out, const int32_t* tokens, const float* table, int64_t T, int64_t H) {
  for (int64_t t = 0; t < T; ++t) {
    std::memcpy(out + t * H, table + static_cast<int64_t>(tokens[t]) * H, static_cast<size_t>(H) * sizeof(float));
  }
}

void embedding_backward(float* dtable, const float* dout, const int32_t* tokens, int64_t T, int64_t H) {
  for (int64_t t = 0; t < T; ++t) {
    float* row = dtable + static_cast<int64_t>(tokens[t]) * H;
    const float* g = dout + t * H;
    for (int64_t h = 0; h < H; ++h) row[h] += g[h];
  }
}

}  // namespace sg::ref
