#pragma once
// Initial parameters, computed on the host in fp32 so the CPU and GPU backends start from identical
// values. Each tensor's ParamInit (model/param_builder.h) decides: normal ~ N(0, init_method_std);
// output_projection with the std scaled by 1/sqrt(2 num_layers), or 1/sqrt(num_layers) with is_hybrid_model
// (GPT-2 / Megatron's output_layer_init_method; num_layers as the config spells it, see model/stack.h); ones;
// zeros; or the tensor's own function. Gaps are 0.
//
// The random numbers come from Philox (counter = element index, tensor index; key = seed), normals
// through Box-Muller in double, so the values depend only on (seed, tensor, element) — not on the
// standard library's distributions, the thread count or the buffer layout.
#include <cstdint>
#include <vector>

#include "model/stack.h"

namespace sg::model {

// Writes model.total() floats into `out`. Uses up to `threads` host threads (0: hardware concurrency);
// the result does not depend on it.
void init_parameters(const ModelLayout& model, uint64_t seed, float* out, int threads = 0);

inline std::vector<float> initial_parameters(const ModelLayout& model, uint64_t seed, int threads = 0) {
  std::vector<float> weights(static_cast<size_t>(model.total()));
  init_parameters(model, seed, weights.data(), threads);
  return weights;
}

// The standard normal / the uniform number in [0, 1) for (seed, stream, index): the streams every
// initialisation draws from (a tensor's stream is its index in the tensor list).
float init_normal(uint64_t seed, uint32_t stream, uint64_t index);
float init_uniform(uint64_t seed, uint32_t stream, uint64_t index);

}  // namespace sg::model
