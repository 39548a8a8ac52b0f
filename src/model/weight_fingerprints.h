#pragma once
// What the step's weight fingerprints cover (validation.test_mode; kernels/weight_fingerprint.h computes them): the
// bf16 compute weights, the whole padded flat buffer, chunk by chunk, then the fp32 main weights when this rank holds
// all of them, or with the distributed optimizer (whose ranks hold different shards of them) every rank's replica of
// the blocks the forward reads in fp32 (kernels/fp32_replica.h; none in a dense model). Data-parallel ranks must hold
// the same weights after every step; a fingerprint that differs between them names the tensors its chunk covers.
#include <cstdint>
#include <string>

#include "model/stack.h"

namespace sg::model {

struct WeightFingerprintLayout {
  int64_t bf16_elements = 0;  // the padded flat buffer (dist::DataParallelLayout::padded_params)
  int64_t fp32_elements = 0;  // layout.total(), or sharded: the replica's (ParamLayout::fp32_packed_total())
  bool fp32_replica = false;  // sharded: the fp32 part is the replica, not the flat main weights
  int64_t chunk_elements = 0;

  int64_t bf16_chunks() const;
  int64_t count() const;  // fingerprints in all
};

WeightFingerprintLayout weight_fingerprint_layout(const ModelLayout& layout, int64_t padded_params, bool sharded);

// "bf16 weights of model.layers.0.mlp.down_proj.weight, model.layers.1.input_layernorm.weight" (at most three
// names, then how many more), "fp32 main weights of ...", "fp32 replica of ...", "... data-parallel padding" or
// "... alignment gaps between tensors".
std::string describe_weight_fingerprint(const ModelLayout& layout, const WeightFingerprintLayout& fingerprints,
                                        int64_t index);

}  // namespace sg::model
