#pragma once
// Initial parameters, computed on the host in fp32 so the CPU and GPU backends start from identical
// values: matrices ~ normal(0, init_method_std), output projections (o_proj, down_proj) with the std
// scaled by 1/sqrt(2 num_layers) (GPT-2 / Megatron), norm weights 1, alignment gaps 0.
//
// The normals come from Philox (counter = element index, tensor index; key = seed) through Box-Muller in
// double, so the values depend only on (seed, tensor, element) — not on the standard library's
// distributions, the thread count or the buffer layout.
#include <cstdint>
#include <vector>

#include "model/param_layout.h"

namespace sg::model {

// Writes layout.total() floats into `out`. Uses up to `threads` host threads (0: hardware concurrency);
// the result does not depend on it.
void init_parameters(const ParamLayout& layout, uint64_t seed, float* out, int threads = 0);

inline std::vector<float> initial_parameters(const ParamLayout& layout, uint64_t seed, int threads = 0) {
  std::vector<float> weights(static_cast<size_t>(layout.total()));
  init_parameters(layout, seed, weights.data(), threads);
  return weights;
}

// The standard normal number for (seed, stream, index): exposed so tests can check the distribution.
float init_normal(uint64_t seed, uint32_t stream, uint64_t index);

}  // namespace sg::model
