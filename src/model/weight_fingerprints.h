#pragma once
// What the step's weight fingerprints cover (validation.test_mode; kernels/weight_fingerprint.h computes them): the
// bf16 compute weights, the whole padded flat buffer, chunk by chunk, then the fp32 main weights when this rank holds
// all of them (not with the distributed optimizer, whose ranks hold different shards). Data-parallel ranks must hold
// the same weights after every step; a fingerprint that differs between them names the tensors its chunk covers.
#include <cstdint>
#include <string>

#include "model/stack.h"

namespace sg::model {

struct WeightFingerprintLayout {
  int64_t bf16_elements = 0;  // the padded flat buffer (dist::DataParallelLayout::padded_params)
  int64_t fp32_elements = 0;  // layout.total(), or 0 (sharded main weights)
  int64_t chunk_elements = 0;

  int64_t bf16_chunks() const;
  int64_t count() const;  // fingerprints in all
};

WeightFingerprintLayout weight_fingerprint_layout(const ModelLayout& layout, int64_t padded_params, bool sharded);

// "bf16 weights of model.layers.0.mlp.down_proj.weight, model.layers.1.input_layernorm.weight" (at most three
// names, then how many more), "fp32 main weights of ...", "... data-parallel padding" or "... alignment gaps between
// tensors".
std::string describe_weight_fingerprint(const ModelLayout& layout, const WeightFingerprintLayout& fingerprints,
                                        int64_t index);

}  // namespace sg::model
