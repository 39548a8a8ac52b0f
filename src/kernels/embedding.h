#pragma once
// Token embedding: forward gathers bf16 rows of the table; backward ADDS the bf16 output gradient into
// the fp32 table gradient (main_grad). CPU twin: reference/embedding.h.
//
// Deterministic backward without float atomics: the tokens are sorted with CUB's DeviceRadixSort (a
// stable sort, so equal tokens keep increasing t order), then one thread block per run of equal tokens
// sums its dout rows in that order and adds the sum into the table row once. Every dtable row is written
// by exactly one block, so the bits do not depend on scheduling. CUB's sort is graph-capturable when it
// is given its temporary storage: the caller provides one scratch buffer of
// embedding_backward_scratch_bytes(T, vocab_size) bytes (planned once, e.g. in the model's arena).
//
// Tokens outside [0, vocab_size) never read or write out of bounds: the forward writes a NaN row for them
// (so a bad batch shows up in the loss instead of silently reading another row) and the backward skips
// them.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "cuda/bf16.h"
#include "kernels/float_buffer.h"

namespace sg::kernels {

struct EmbeddingForwardParams {
  bf16* out = nullptr;              // [T, H]
  const int32_t* tokens = nullptr;  // [T]
  const bf16* table = nullptr;      // [vocab_size, H]
  int64_t T = 0, H = 0, vocab_size = 0;
};
void embedding_forward(cudaStream_t stream, const EmbeddingForwardParams& p);

struct EmbeddingBackwardParams {
  FloatBuffer dtable;               // [vocab_size, H] main_grad (fp32 or bf16), ADDED into
  const bf16* dout = nullptr;       // [T, H]
  const int32_t* tokens = nullptr;  // [T]
  void* scratch = nullptr;          // embedding_backward_scratch_bytes(T, vocab_size) bytes, 256-aligned
  size_t scratch_bytes = 0;
  int64_t T = 0, H = 0, vocab_size = 0;
};
void embedding_backward(cudaStream_t stream, const EmbeddingBackwardParams& p);

// Scratch of the backward (sort keys/values in and out, then CUB's temporary storage). Plan time only:
// it asks CUB for its temporary storage size, which queries the current device.
size_t embedding_backward_scratch_bytes(int64_t T, int64_t vocab_size);

}  // namespace sg::kernels
