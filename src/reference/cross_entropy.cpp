#include "reference/cross_entropy.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "core/error.h"
#include "core/strings.h"

namespace sg::ref {

double cross_entropy_forward_backward(float* dlogits, const float* logits, const int32_t* targets,
                                      const float* loss_mask, int64_t T, int64_t V, float scale) {
  SG_CHECK(T >= 0 && V > 0, strprintf("cross_entropy: bad shape T=%lld V=%lld", (long long)T, (long long)V));
  double total = 0.0;
  for (int64_t t = 0; t < T; ++t) {
    const float* row = logits + t * V;
    const float mask = loss_mask[t];
    const int32_t target = targets[t];
    if (mask != 0.0f) {
      SG_CHECK(target >= 0 && target < V,
               strprintf("cross_entropy: target %d of row %lld is outside the vocabulary [0, %lld); fix the "
                         "dataset or mask the row out",
                         target, (long long)t, (long long)V));
    }
    float row_max = row[0];
    for (int64_t v = 1; v < V; ++v) row_max = std::max(row_max, row[v]);
    double sum_exp = 0.0;
    for (int64_t v = 0; v < V; ++v) sum_exp += std::exp(static_cast<double>(row[v]) - row_max);
    if (mask != 0.0f) {
      const double loss = std::log(sum_exp) + row_max - static_cast<double>(row[target]);
      total += static_cast<double>(mask) * loss;
    }
    if (dlogits != nullptr) {
      float* drow = dlogits + t * V;
      const float row_scale = scale * mask;
      for (int64_t v = 0; v < V; ++v) {
        const double p = std::exp(static_cast<double>(row[v]) - row_max) / sum_exp;
        const double onehot = (mask != 0.0f && v == target) ? 1.0 : 0.0;
        drow[v] = static_cast<float>(row_scale * (p - onehot));
      }
    }
  }
  return total;
}

double loss_token_count(const float* loss_mask, int64_t T) {
  double count = 0.0;
  for (int64_t t = 0; t < T; ++t) count += loss_mask[t];
  return count;
}

}  // namespace sg::ref
