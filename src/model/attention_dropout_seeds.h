#pragma once
// Glue between the RNG tracker and cuDNN's attention dropout: once per microbatch, writes the cuDNN
// dropout seed and offset (device int64 scalars, see model/dropout_sites.h) of every attention layer
// from the generator's device RngState. One tiny launch for all layers, no host scalars that change
// between steps: capturable.
//
// Why a kernel in model/: the values are a model-specific function of (state, site), and neither
// kernels/dropout nor cuda/rng_tracker has a launcher that derives per-call-site cuDNN seeds; it can
// move to either if one grows such a launcher.
#include <cuda_runtime.h>

#include <cstdint>

#include "core/philox.h"

namespace sg::model {

struct AttentionDropoutSeedsParams {
  const rng::RngState* state = nullptr;  // device: the generator attention dropout draws from
  const uint32_t* sites = nullptr;       // device [count]: each slot's attention-probabilities site
  int64_t* seeds = nullptr;              // device [count]: attention_dropout_seed(seed, sites[i], offset)
  int64_t* offsets = nullptr;            // device [count]: attention_dropout_offset(offset)
  int count = 0;
};
void write_attention_dropout_seeds(cudaStream_t stream, const AttentionDropoutSeedsParams& p);

}  // namespace sg::model
