#include "reference/moe_gating.h"

namespace sg::ref {

void moe_gating_widen(float* out, const float* in, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = in[i];
}

void moe_gating_add_grad(float* dx, const float* add, int64_t n) {
  for (int64_t i = 0; i < n; ++i) dx[i] += add[i];
}

}  // namespace sg::ref
