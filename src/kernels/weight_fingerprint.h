#pragma once
// Fingerprints of a flat buffer's bits in fixed chunks, on the device (CPU twin: reference/weight_fingerprint.h, which
// says what a fingerprint is): the data-parallel ranks compare them after every step under validation.test_mode.
// One block a chunk adds its elements' integer mixes; the sum modulo 2^64 does not depend on the order, so the bits
// are the CPU twin's exactly.
#include <cuda_runtime.h>

#include <cstdint>

#include "reference/weight_fingerprint.h"

namespace sg::kernels {

struct WeightFingerprintParams {
  const void* data = nullptr;  // [count] elements of element_bytes (2: bf16, 4: fp32), read as unsigned integers
  int element_bytes = 2;
  int64_t count = 0;
  int64_t chunk_elements = ref::kFingerprintChunkElements;
  uint64_t* fingerprints = nullptr;  // OUT [ref::fingerprint_chunks(count, chunk_elements)]
};
void weight_fingerprints(cudaStream_t stream, const WeightFingerprintParams& p);

}  // namespace sg::kernels
