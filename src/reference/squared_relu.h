#pragma once
// CPU fp32 twin of src/kernels/squared_relu: Nemotron-H's non-gated MLP activation (Megatron's
// squared_relu, HF's "relu2"): out = relu(x)^2, dx = dout * 2 relu(x).
#include <cstdint>

namespace sg::ref {

// out, in [T, F]; out may alias in.
void squared_relu_forward(float* out, const float* in, int64_t T, int64_t F);
// din [T, F] OVERWRITTEN; din may alias dout.
void squared_relu_backward(float* din, const float* dout, const float* in, int64_t T, int64_t F);

// Scalar-generic twins (float and double instantiated) for fp64 gradient checks.
template <class Real>
void squared_relu_forward_generic(Real* out, const Real* in, int64_t T, int64_t F);
template <class Real>
void squared_relu_backward_generic(Real* din, const Real* dout, const Real* in, int64_t T, int64_t F);

}  // namespace sg::ref
