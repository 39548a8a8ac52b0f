#pragma once
// CPU twin of src/kernels/decode_state: the bookkeeping at the end of one generation step, kept on the
// device so one captured graph serves every step.
//   history[b * history_stride + step] = tokens[b]   (when step < history_stride)
//   positions[b] += 1                                 (where the sequence's next token goes)
//   step += 1                                         (the next draw's Philox offset)
#include <cstdint>

namespace sg::ref {

void decode_advance(int32_t* history, int64_t history_stride, const int32_t* tokens, int32_t* positions, int64_t* step,
                    int64_t B);

}  // namespace sg::ref
