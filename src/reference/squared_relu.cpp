#include "reference/squared_relu.h"

namespace sg::ref {

template <class Real>
void squared_relu_forward_generic(Real* out, const Real* in, int64_t T, int64_t F) {
  for (int64_t i = 0; i < T * F; ++i) {
    const Real r = in[i] > Real(0) ? in[i] : Real(0);
    out[i] = r * r;
  }
}

template <class Real>
void squared_relu_backward_generic(Real* din, const Real* dout, const Real* in, int64_t T, int64_t F) {
  for (int64_t i = 0; i < T * F; ++i) {
    const Real r = in[i] > Real(0) ? in[i] : Real(0);
    din[i] = dout[i] * (Real(2) * r);
  }
}

template void squared_relu_forward_generic<float>(float*, const float*, int64_t, int64_t);
template void squared_relu_forward_generic<double>(double*, const double*, int64_t, int64_t);
template void squared_relu_backward_generic<float>(float*, const float*, const float*, int64_t, int64_t);
template void squared_relu_backward_generic<double>(double*, const double*, const double*, int64_t, int64_t);

void squared_relu_forward(float* out, const float* in, int64_t T, int64_t F) {
  squared_relu_forward_generic<float>(out, in, T, F);
}

void squared_relu_backward(float* din, const float* dout, const float* in, int64_t T, int64_t F) {
  squared_relu_backward_generic<float>(din, dout, in, T, F);
}

}  // namespace sg::ref
