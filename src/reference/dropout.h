#pragma once
// CPU fp32 twin of src/kernels/dropout. Element i is kept iff
// philox_uniform(state.seed, state.offset, site, i) >= p, and kept values are scaled by 1/(1-p).
// The mask is recomputed from (state, site) in the backward, never stored; the GPU draws the same mask.
#include <cstdint>

#include "core/philox.h"

namespace sg::ref {

// out, in [n]. p == 0 copies; p must be in [0, 1).
void dropout_forward(float* out, const float* in, int64_t n, float p, rng::RngState state, uint32_t site);

// din = dout * mask / (1-p), the same mask as dropout_forward with the same (state, site).
void dropout_backward(float* din, const float* dout, int64_t n, float p, rng::RngState state, uint32_t site);

}  // namespace sg::ref
