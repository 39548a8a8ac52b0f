#include "reference/linear.h"

#include <algorithm>
#include <vector>

namespace sg::ref {

// Dot products accumulate in double: this is the ground truth the bf16 GPU path is measured against.

void linear_forward(float* y, const float* x, const float* w, int64_t T, int64_t K, int64_t N) {
  for (int64_t t = 0; t < T; ++t) {
    const float* xt = x + t * K;
    for (int64_t n = 0; n < N; ++n) {
      const float* wn = w + n * K;
      double acc = 0.0;
      for (int64_t k = 0; k < K; ++k) acc += static_cast<double>(xt[k]) * wn[k];
      y[t * N + n] = static_cast<float>(acc);
    }
  }
}

void add_row_bias(float* y, const float* bias, int64_t T, int64_t N) {
  if (bias == nullptr) return;
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t n = 0; n < N; ++n) y[t * N + n] += bias[n];
  }
}

void linear_backward_input(float* dx, const float* dy, const float* w, int64_t T, int64_t K, int64_t N) {
  std::vector<double> row(static_cast<size_t>(K));
  for (int64_t t = 0; t < T; ++t) {
    std::fill(row.begin(), row.end(), 0.0);
    for (int64_t n = 0; n < N; ++n) {
      const double g = dy[t * N + n];
      const float* wn = w + n * K;
      for (int64_t k = 0; k < K; ++k) row[k] += g * wn[k];
    }
    for (int64_t k = 0; k < K; ++k) dx[t * K + k] = static_cast<float>(row[k]);
  }
}

void linear_backward_weight(float* dw, const float* dy, const float* x, int64_t T, int64_t K, int64_t N) {
  std::vector<double> row(static_cast<size_t>(K));
  for (int64_t n = 0; n < N; ++n) {
    std::fill(row.begin(), row.end(), 0.0);
    for (int64_t t = 0; t < T; ++t) {
      const double g = dy[t * N + n];
      const float* xt = x + t * K;
      for (int64_t k = 0; k < K; ++k) row[k] += g * xt[k];
    }
    float* dwn = dw + n * K;
    for (int64_t k = 0; k < K; ++k) dwn[k] = static_cast<float>(dwn[k] + row[k]);
  }
}

}  // namespace sg::ref
