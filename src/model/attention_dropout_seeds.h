#pragma once
// Glue between the RNG tracker and cuDNN's attention dropout: once per microbatch, writes every layer's
// cuDNN dropout seed and offset (device int64 scalars, see model/dropout_sites.h) from the generator's
// device RngState. One tiny launch, no host scalars that change between steps: capturable.
//
// Why a kernel in model/: the values are a model-specific function of (state, layer), and neither
// kernels/dropout nor cuda/rng_tracker has a launcher that derives per-call-site cuDNN seeds; it can
// move to either if one grows such a launcher.
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/philox.h"

namespace sg::model {

struct AttentionDropoutSeedsParams {
  const rng::RngState* state = nullptr;  // device: the generator attention dropout draws from
  int64_t* seeds = nullptr;              // device [num_layers]: attention_dropout_seed(seed, site(l))
  int64_t* offsets = nullptr;            // device [num_layers]: attention_dropout_offset(offset)
  int num_layers = 0;
};
void write_attention_dropout_seeds(cudaStream_t stream, const AttentionDropoutSeedsParams& p);

}  // namespace sg::model
