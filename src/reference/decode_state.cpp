#include "reference/decode_state.h"

namespace sg::ref {

void decode_advance(int32_t* history, int64_t history_stride, const int32_t* tokens, int32_t* positions, int64_t* step,
                    int64_t B) {
  const int64_t s = *step;
  for (int64_t b = 0; b < B; ++b) {
    if (s >= 0 && s < history_stride) history[b * history_stride + s] = tokens[b];
    positions[b] += 1;
  }
  *step = s + 1;
}

}  // namespace sg::ref
