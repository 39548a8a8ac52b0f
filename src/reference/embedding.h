#pragma once
// CPU fp32 twin of src/kernels/embedding: token embedding lookup and its gradient.
#include <cstdint>

namespace sg::ref {

// out[t, :] = table[tokens[t], :]  (out [T, H], table [V, H] row-major).
void embedding_forward(float* out, const int32_t* tokens, const float* table, int64_t T, int64_t H);

// dtable[tokens[t], :] += dout[t, :] for t = 0..T-1 in order (ADDS into dtable).
void embedding_backward(float* dtable, const float* dout, const int32_t* tokens, int64_t T, int64_t H);

}  // namespace sg::ref
