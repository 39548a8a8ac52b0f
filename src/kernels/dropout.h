#pragma once
// Dropout with a recomputed mask (never stored). CPU twin: reference/dropout.h, bitwise the same mask:
// element i is kept iff philox_uniform(seed, offset, site, i) >= p, kept values scaled by 1/(1-p) in
// fp32 and rounded to bf16. The seed/offset are read from DEVICE memory (`state`), so a replayed graph
// draws what eager would for the current offset; `site` and `p` are plan-time constants.
// out may alias in (in place). p == 0 copies (a device-to-device memcpy when out != in).
#include <cuda_runtime.h>

#include <cstdint>

#include "core/philox.h"
#include "cuda/bf16.h"

namespace sg::kernels {

struct DropoutForwardParams {
  bf16* out = nullptr;                      // [n]
  const bf16* in = nullptr;                 // [n]
  const rng::RngState* state = nullptr;     // device pointer
  int64_t n = 0;
  float p = 0.0f;                           // drop probability in [0, 1)
  uint32_t site = 0;                        // call-site id (plan-time constant, see model/dropout_sites.h)
};
void dropout_forward(cudaStream_t stream, const DropoutForwardParams& p);

// din = dout * mask / (1-p) with the forward's mask (same state and site).
struct DropoutBackwardParams {
  bf16* din = nullptr;                      // [n]
  const bf16* dout = nullptr;               // [n]
  const rng::RngState* state = nullptr;     // device pointer
  int64_t n = 0;
  float p = 0.0f;
  uint32_t site = 0;
};
void dropout_backward(cudaStream_t stream, const DropoutBackwardParams& p);

}  // namespace sg::kernels
