#pragma once
// One optimizer step's input batch on the host: num_microbatches * micro_batch_size sequences of
// seq_length tokens, microbatch m at rows [m T, (m+1) T) with T = micro_batch_size * seq_length.
// targets[t] is the token to predict at t (the next token); loss_mask[t] is 1 where the loss counts.
#include <cstdint>
#include <vector>

#include "core/error.h"
#include "core/strings.h"
#include "model/spec.h"

namespace sg::model {

struct HostBatch {
  std::vector<int32_t> tokens;
  std::vector<int32_t> targets;
  std::vector<float> loss_mask;

  // Throws sg::Error unless every array holds exactly the step's tokens and ids are in [0, vocab).
  void check(const ModelSpec& model, const BatchSpec& batch) const {
    const size_t n = static_cast<size_t>(batch.num_microbatches * batch.tokens_per_microbatch(model));
    SG_CHECK(tokens.size() == n && targets.size() == n && loss_mask.size() == n,
             strprintf("batch has %zu tokens, %zu targets, %zu mask values; the step needs %zu of each "
                       "(num_microbatches x micro_batch_size x seq_length)",
                       tokens.size(), targets.size(), loss_mask.size(), n));
    for (size_t i = 0; i < n; ++i) {
      SG_CHECK(tokens[i] >= 0 && tokens[i] < model.vocab_size,
               strprintf("token %d at position %zu is outside the vocabulary [0, %lld)", tokens[i], i,
                         static_cast<long long>(model.vocab_size)));
      SG_CHECK(loss_mask[i] == 0.0f || (targets[i] >= 0 && targets[i] < model.vocab_size),
               strprintf("target %d at position %zu is outside the vocabulary [0, %lld)", targets[i], i,
                         static_cast<long long>(model.vocab_size)));
    }
  }
};

}  // namespace sg::model
