#pragma once
// The next token of each sequence from its fp32 logits: greedy argmax, or temperature / top-k / top-p
// sampling with the project's Philox. CPU twin and exact semantics: reference/sampling.h.
//
// Greedy: one block per row, an (value, id) argmax reduction whose result does not depend on the
// order (ties go to the lower id), so it is exact against the twin.
// Sampling: the rows are sorted by CUB's segmented radix sort (descending, stable: ties keep id order)
// into the scratch, then one block per row scans the sorted weights in tiles of a fixed size
// (CUB BlockScan, fp32, a fixed order): once for Z, once for the top-p cut, once for the draw.
//
// Graph-safe: the Philox offset (`step`) is read from device memory, sampling settings are plan-time
// constants, the scratch is planned (sample_tokens_scratch_bytes): no allocation, no sync.
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "reference/sampling.h"

namespace sg::kernels {

struct SampleTokensParams {
  int32_t* tokens = nullptr;      // [B] out
  const float* logits = nullptr;  // [B, ld], V used per row
  int64_t B = 0, V = 0, ld = 0;
  ref::SamplingConfig config;
  const int64_t* step = nullptr;  // device: the Philox offset of the draws (required when sampling)
  void* scratch = nullptr;        // sample_tokens_scratch_bytes(B, V, ld, config), 256-byte aligned
  size_t scratch_bytes = 0;
};
void sample_tokens(cudaStream_t stream, const SampleTokensParams& p);

// Plan time (asks CUB for its temporary storage size). 0 for greedy.
size_t sample_tokens_scratch_bytes(int64_t B, int64_t V, int64_t ld, const ref::SamplingConfig& config);

}  // namespace sg::kernels
