#pragma once
// LongRoPE (Phi-3.5-mini, Phi-4-mini; transformers' rope_type "longrope"): one factor per rotated pair for sequences
// of up to original_max_position_embeddings positions (short) and one for longer ones (long), and the attention factor
// on cos and sin. A model holds both lists (the configuration's model.longrope_* keys, or a folder's); the kernels
// take the list for a sequence length as ref::RopeScaling (reference/rope_frequencies.h).
#include <cstddef>
#include <cstdint>
#include <vector>

#include "reference/rope_frequencies.h"

namespace sg::model {

struct LongRope {
  std::vector<float> short_factor, long_factor;  // fp32, as transformers' tensors of them; empty: no LongRoPE
  int64_t original_max_position_embeddings = 4096;
  double attention_factor = 1.0;

  bool enabled() const { return !short_factor.empty(); }
  // The scaling of sequences of up to `positions` positions, as transformers picks it for a sequence that long: the
  // long factors past original_max_position_embeddings, else the short ones (none when not enabled).
  ref::RopeScaling scaling_for(int64_t positions) const {
    ref::RopeScaling s;
    if (!enabled()) return s;
    const std::vector<float>& factors = positions > original_max_position_embeddings ? long_factor : short_factor;
    s.longrope_pairs = static_cast<int32_t>(factors.size());
    for (size_t i = 0; i < factors.size() && i < static_cast<size_t>(ref::kMaxLongRopePairs); ++i) {
      s.longrope_factors[i] = factors[i];
    }
    s.attention_factor = attention_factor;
    return s;
  }
};

}  // namespace sg::model
