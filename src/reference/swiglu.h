#pragma once
// CPU fp32 twin of src/kernels/swiglu: out = silu(gate) * up, with gate_up row = [gate F | up F].
#include <cstdint>

namespace sg::ref {

// out [T, F]; gate_up [T, 2F].
void swiglu_forward(float* out, const float* gate_up, int64_t T, int64_t F);

// dgate_up [T, 2F] is OVERWRITTEN: [dgate | dup].
void swiglu_backward(float* dgate_up, const float* dout, const float* gate_up, int64_t T, int64_t F);

// Scalar-generic twins (float and double instantiated) for fp64 gradient checks.
template <class Real>
void swiglu_forward_generic(Real* out, const Real* gate_up, int64_t T, int64_t F);
template <class Real>
void swiglu_backward_generic(Real* dgate_up, const Real* dout, const Real* gate_up, int64_t T, int64_t F);

}  // namespace sg::ref
