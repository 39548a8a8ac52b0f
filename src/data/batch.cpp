#include "data/batch.h"

#include <vector>

#include "core/error.h"
#include "core/strings.h"

namespace sg::data {

DataPosition fill_batch(DataLoader& loader, const HostBatchView& out, const BatchOptions& options) {
  SG_CHECK(out.tokens != nullptr && out.targets != nullptr && out.loss_mask != nullptr,
           "fill_batch: the host batch buffers are not set");
  SG_CHECK(out.seq_length == loader.seq_length(),
           strprintf("fill_batch: batch seq_length %lld differs from the data loader's %lld",
                     static_cast<long long>(out.seq_length),
                     static_cast<long long>(loader.seq_length())));
  SG_CHECK(out.num_sequences > 0, "fill_batch: num_sequences must be positive");
  SG_CHECK(!options.eod_mask_loss || options.eod_token >= 0,
           "dataset.eod_mask_loss needs the end-of-document token id (eod_token >= 0)");
  const int64_t L = out.seq_length;
  std::vector<int32_t> window(static_cast<size_t>(L) + 1);
  for (int64_t r = 0; r < out.num_sequences; ++r) {
    loader.next(window.data());
    int32_t* tokens = out.tokens + r * L;
    int32_t* targets = out.targets + r * L;
    float* mask = out.loss_mask + r * L;
    for (int64_t t = 0; t < L; ++t) {
      tokens[t] = window[t];
      targets[t] = window[t + 1];
      mask[t] = options.eod_mask_loss && window[t] == options.eod_token ? 0.0f : 1.0f;
    }
  }
  return loader.position();
}

}  // namespace sg::data
