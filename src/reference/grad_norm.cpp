#include "reference/grad_norm.h"

#include <cmath>

namespace sg::ref {

double grad_global_norm(const float* grads, int64_t n) {
  double sum_sq = 0.0;
  for (int64_t i = 0; i < n; ++i) sum_sq += static_cast<double>(grads[i]) * grads[i];
  return std::sqrt(sum_sq);
}

float clip_coefficient(double norm, float max_norm) {
  const float norm_f = static_cast<float>(norm);
  // Clipping off, or a non-finite norm (no scaling; the non-finite flag reports it).
  if (!(max_norm > 0.0f) || !std::isfinite(norm_f)) return 1.0f;
  const float coef = max_norm / (norm_f + 1e-6f);
  return coef < 1.0f ? coef : 1.0f;
}

}  // namespace sg::ref
