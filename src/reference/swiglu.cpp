#include "reference/swiglu.h"

#include <cmath>

namespace sg::ref {

template <class Real>
void swiglu_forward_generic(Real* out, const Real* gate_up, int64_t T, int64_t F) {
  for (int64_t t = 0; t < T; ++t) {
    const Real* gate = gate_up + t * 2 * F;
    const Real* up = gate + F;
    for (int64_t j = 0; j < F; ++j) {
      const Real g = gate[j];
      const Real sig = Real(1) / (Real(1) + std::exp(-g));
      out[t * F + j] = g * sig * up[j];
    }
  }
}

// out = g sig(g) u:  dg = dout u sig(g) (1 + g (1 - sig(g))),  du = dout g sig(g).
template <class Real>
void swiglu_backward_generic(Real* dgate_up, const Real* dout, const Real* gate_up, int64_t T, int64_t F) {
  for (int64_t t = 0; t < T; ++t) {
    const Real* gate = gate_up + t * 2 * F;
    const Real* up = gate + F;
    Real* dgate = dgate_up + t * 2 * F;
    Real* dup = dgate + F;
    for (int64_t j = 0; j < F; ++j) {
      const Real g = gate[j];
      const Real sig = Real(1) / (Real(1) + std::exp(-g));
      const Real dy = dout[t * F + j];
      dgate[j] = dy * up[j] * sig * (Real(1) + g * (Real(1) - sig));
      dup[j] = dy * g * sig;
    }
  }
}

template void swiglu_forward_generic<float>(float*, const float*, int64_t, int64_t);
template void swiglu_forward_generic<double>(double*, const double*, int64_t, int64_t);
template void swiglu_backward_generic<float>(float*, const float*, const float*, int64_t, int64_t);
template void swiglu_backward_generic<double>(double*, const double*, const double*, int64_t, int64_t);

void swiglu_forward(float* out, const float* gate_up, int64_t T, int64_t F) {
  swiglu_forward_generic<float>(out, gate_up, T, F);
}

void swiglu_backward(float* dgate_up, const float* dout, const float* gate_up, int64_t T, int64_t F) {
  swiglu_backward_generic<float>(dgate_up, dout, gate_up, T, F);
}

}  // namespace sg::ref
