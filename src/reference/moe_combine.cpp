#include "reference/moe_combine.h"

#include <algorithm>

namespace sg::ref {

template <class Real>
void moe_combine_forward(Real* out, const Real* expert_out, const Real* probs, const int32_t* slot_to_row, int64_t T,
                         int64_t k, int64_t H) {
  for (int64_t t = 0; t < T; ++t) {
    Real* o = out + t * H;
    std::fill(o, o + H, Real(0));
    for (int64_t j = 0; j < k; ++j) {
      const int32_t row = slot_to_row[t * k + j];
      if (row < 0) continue;
      const Real p = probs[t * k + j];
      for (int64_t h = 0; h < H; ++h) o[h] += p * expert_out[row * H + h];
    }
  }
}

template <class Real>
void moe_combine_backward(Real* dexpert_out, Real* dprobs, const Real* dout, const Real* expert_out,
                          const Real* probs, const int32_t* slot_to_row, const int32_t* row_to_slot, int64_t T,
                          int64_t k, int64_t H, int64_t rows) {
  for (int64_t r = 0; r < rows; ++r) {
    const int32_t s = row_to_slot[r];
    Real* d = dexpert_out + r * H;
    if (s < 0) {
      std::fill(d, d + H, Real(0));
      continue;
    }
    const Real* g = dout + (s / k) * H;
    for (int64_t h = 0; h < H; ++h) d[h] = probs[s] * g[h];
  }
  for (int64_t s = 0; s < T * k; ++s) {
    const int32_t row = slot_to_row[s];
    if (row < 0) {
      dprobs[s] = Real(0);
      continue;
    }
    double dot = 0.0;
    for (int64_t h = 0; h < H; ++h) dot += static_cast<double>(expert_out[row * H + h]) * dout[(s / k) * H + h];
    dprobs[s] = static_cast<Real>(dot);
  }
}

template void moe_combine_forward<float>(float*, const float*, const float*, const int32_t*, int64_t, int64_t,
                                         int64_t);
template void moe_combine_forward<double>(double*, const double*, const double*, const int32_t*, int64_t, int64_t,
                                          int64_t);
template void moe_combine_backward<float>(float*, float*, const float*, const float*, const float*, const int32_t*,
                                          const int32_t*, int64_t, int64_t, int64_t, int64_t);
template void moe_combine_backward<double>(double*, double*, const double*, const double*, const double*,
                                           const int32_t*, const int32_t*, int64_t, int64_t, int64_t, int64_t);

}  // namespace sg::ref
