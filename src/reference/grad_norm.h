#pragma once
// CPU twin of src/kernels/grad_norm: global L2 norm of the gradients and the clipping coefficient.
#include <cstdint>

namespace sg::ref {

// sqrt(sum g^2), accumulated in fp64. NaN/inf in grads gives a NaN/inf norm.
double grad_global_norm(const float* grads, int64_t n);

// Megatron's clip_grad_norm: min(1, max_norm / (norm + 1e-6)).
// max_norm <= 0 (clipping off) -> 1; a non-finite norm -> 1 (no scaling; the non-finite flag reports it).
// Computed in fp32: coef = max_norm / (float(norm) + 1e-6f).
float clip_coefficient(double norm, float max_norm);

}  // namespace sg::ref
