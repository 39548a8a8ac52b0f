#include "reference/causal_conv1d.h"

#include <cmath>
#include <vector>

namespace sg::ref {
namespace {

constexpr int64_t W = kCausalConv1dWidth;

// The pre-activation at (b, t, c), accumulated in the kernel's order: bias, then k = 0..3.
template <class Real>
Real pre_activation(const Real* in, int64_t in_stride, const Real* weight, const Real* bias, int64_t b, int64_t S,
                    int64_t t, int64_t c) {
  Real acc = bias[c];
  for (int64_t k = 0; k < W; ++k) {
    const int64_t s = t - (W - 1) + k;
    if (s >= 0) acc += weight[c * W + k] * in[(b * S + s) * in_stride + c];
  }
  return acc;
}

}  // namespace

template <class Real>
void causal_conv1d_silu_forward_generic(Real* out, const Real* in, int64_t in_stride, const Real* weight,
                                        const Real* bias, int64_t B, int64_t S, int64_t C) {
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < S; ++t)
      for (int64_t c = 0; c < C; ++c) {
        const Real p = pre_activation(in, in_stride, weight, bias, b, S, t, c);
        out[(b * S + t) * C + c] = p / (Real(1) + std::exp(-p));
      }
}

// dpre = dout * silu'(pre), silu'(p) = sig(p) (1 + p (1 - sig(p)));
// din[t] = sum_k weight[k] * dpre[t + 3 - k] (t + 3 - k < S); dweight[k] += sum_t dpre[t] in[t - 3 + k];
// dbias += sum_t dpre[t].
template <class Real>
void causal_conv1d_silu_backward_generic(Real* din, int64_t din_stride, Real* dweight, Real* dbias,
                                         const Real* dout, const Real* in, int64_t in_stride, const Real* weight,
                                         const Real* bias, int64_t B, int64_t S, int64_t C) {
  std::vector<Real> dpre(static_cast<size_t>(S));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t c = 0; c < C; ++c) {
      for (int64_t t = 0; t < S; ++t) {
        const Real p = pre_activation(in, in_stride, weight, bias, b, S, t, c);
        const Real sig = Real(1) / (Real(1) + std::exp(-p));
        dpre[t] = dout[(b * S + t) * C + c] * sig * (Real(1) + p * (Real(1) - sig));
      }
      // Weight gradients summed in double: the reference's own rounding stays negligible.
      double dw[W] = {0, 0, 0, 0}, db = 0;
      for (int64_t t = 0; t < S; ++t) {
        Real dx = 0;
        for (int64_t k = W - 1; k >= 0; --k) {
          const int64_t s = t + (W - 1) - k;
          if (s < S) dx += weight[c * W + k] * dpre[s];
        }
        din[(b * S + t) * din_stride + c] = dx;
        db += static_cast<double>(dpre[t]);
        for (int64_t k = 0; k < W; ++k) {
          const int64_t s = t - (W - 1) + k;
          if (s >= 0) dw[k] += static_cast<double>(dpre[t]) * in[(b * S + s) * in_stride + c];
        }
      }
      for (int64_t k = 0; k < W; ++k) dweight[c * W + k] += static_cast<Real>(dw[k]);
      dbias[c] += static_cast<Real>(db);
    }
}

template void causal_conv1d_silu_forward_generic<float>(float*, const float*, int64_t, const float*, const float*,
                                                        int64_t, int64_t, int64_t);
template void causal_conv1d_silu_forward_generic<double>(double*, const double*, int64_t, const double*,
                                                         const double*, int64_t, int64_t, int64_t);
template void causal_conv1d_silu_backward_generic<float>(float*, int64_t, float*, float*, const float*, const float*,
                                                         int64_t, const float*, const float*, int64_t, int64_t,
                                                         int64_t);
template void causal_conv1d_silu_backward_generic<double>(double*, int64_t, double*, double*, const double*,
                                                          const double*, int64_t, const double*, const double*,
                                                          int64_t, int64_t, int64_t);

void causal_conv1d_silu_forward(float* out, const float* in, int64_t in_stride, const float* weight,
                                const float* bias, int64_t B, int64_t S, int64_t C) {
  causal_conv1d_silu_forward_generic<float>(out, in, in_stride, weight, bias, B, S, C);
}

void causal_conv1d_silu_forward_continued(float* out, float* state, const float* in, int64_t in_stride,
                                          const float* weight, const float* bias, int64_t S, int64_t C) {
  constexpr int64_t kept = W - 1;
  // Input s of the continued sequence: in's row s, or (s < 0) the kept input s rows before it.
  const auto input = [&](int64_t c, int64_t s) { return s >= 0 ? in[s * in_stride + c] : state[c * kept + kept + s]; };
  float last[kept];
  for (int64_t c = 0; c < C; ++c) {
    for (int64_t t = 0; t < S; ++t) {
      float acc = bias[c];
      for (int64_t k = 0; k < W; ++k) acc += weight[c * W + k] * input(c, t - (W - 1) + k);
      out[t * C + c] = acc / (1.0f + std::exp(-acc));
    }
    for (int64_t j = 0; j < kept; ++j) last[j] = input(c, S - kept + j);
    for (int64_t j = 0; j < kept; ++j) state[c * kept + j] = last[j];
  }
}

void causal_conv1d_silu_backward(float* din, int64_t din_stride, float* dweight, float* dbias, const float* dout,
                                 const float* in, int64_t in_stride, const float* weight, const float* bias,
                                 int64_t B, int64_t S, int64_t C) {
  causal_conv1d_silu_backward_generic<float>(din, din_stride, dweight, dbias, dout, in, in_stride, weight, bias, B,
                                             S, C);
}

}  // namespace sg::ref
