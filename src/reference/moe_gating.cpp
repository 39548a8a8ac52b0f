#include "reference/moe_gating.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace sg::ref {

void moe_gating_backward_input(float* dx, const float* dlogits, const float* w, int64_t T, int64_t E, int64_t H) {
  std::vector<float> acc(static_cast<size_t>(H));
  for (int64_t t = 0; t < T; ++t) {
    std::fill(acc.begin(), acc.end(), 0.0f);
    for (int64_t e = 0; e < E; ++e) {
      const float d = dlogits[t * E + e];
      const float* we = w + e * H;
      for (int64_t h = 0; h < H; ++h) acc[h] = std::fmaf(d, we[h], acc[h]);
    }
    for (int64_t h = 0; h < H; ++h) dx[t * H + h] += acc[h];
  }
}

void moe_gating_add_grad(float* dx, const float* add, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dx[i] += add[i];
}

}  // namespace sg::ref
