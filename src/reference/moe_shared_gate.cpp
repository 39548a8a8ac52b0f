#include "reference/moe_shared_gate.h"

#include <cmath>
#include <vector>

namespace sg::ref {

namespace {

double dot(const float* a, const float* b, int64_t n) {
  double sum = 0.0;
  for (int64_t i = 0; i < n; ++i) sum += static_cast<double>(a[i]) * b[i];  // float x float is exact in double
  return sum;
}

}  // namespace

void moe_shared_gate_forward(float* out, float* gate, const float* shared, const float* input, const float* weight,
                             int64_t T, int64_t H) {
  for (int64_t t = 0; t < T; ++t) {
    const double g = 1.0 / (1.0 + std::exp(-dot(input + t * H, weight, H)));
    gate[t] = static_cast<float>(g);
    float* o = out + t * H;
    const float* s = shared + t * H;
    for (int64_t h = 0; h < H; ++h) o[h] = static_cast<float>(o[h] + g * s[h]);
  }
}

void moe_shared_gate_backward(float* d_shared, float* d_logit, float* d_input, float* d_weight, const float* dy,
                              const float* shared, const float* input, const float* weight, const float* gate,
                              int64_t T, int64_t H) {
  std::vector<double> dw(d_weight, d_weight + H);  // summed over tokens in double, rounded once
  for (int64_t t = 0; t < T; ++t) {
    const double g = gate[t];
    const float* dy_t = dy + t * H;
    const double dl = dot(dy_t, shared + t * H, H) * g * (1.0 - g);
    d_logit[t] = static_cast<float>(dl);
    float* ds = d_shared + t * H;
    float* di = d_input + t * H;
    const float* x = input + t * H;
    for (int64_t h = 0; h < H; ++h) {
      ds[h] = static_cast<float>(g * dy_t[h]);
      di[h] = static_cast<float>(di[h] + dl * weight[h]);
      dw[h] += dl * x[h];
    }
  }
  for (int64_t h = 0; h < H; ++h) d_weight[h] = static_cast<float>(dw[h]);
}

}  // namespace sg::ref
