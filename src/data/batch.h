#pragma once
// The host side of a batch: the trainer hands in host buffers (pinned, double-buffered for the
// async H2D copy — that part is the trainer's) and fill_batch writes one global batch into them.
//
// Layout: row-major [num_sequences, seq_length]; microbatch m is rows [m*mbs, (m+1)*mbs), and token
// t of a microbatch is at position t % seq_length of sequence t / seq_length (the activation
// layout). For each sample window w (seq_length + 1 tokens): tokens = w[0..L), targets = w[1..L],
// loss_mask 1, or 0 where the input token is the EOD token and eod_mask_loss is on (Megatron's
// eod_mask_loss).
#include <cstdint>

#include "data/blended_dataset.h"

namespace sg::data {

struct HostBatchView {
  int32_t* tokens = nullptr;   // [num_sequences * seq_length]
  int32_t* targets = nullptr;  // [num_sequences * seq_length]
  float* loss_mask = nullptr;  // [num_sequences * seq_length]
  int64_t num_sequences = 0;   // global_batch_size
  int64_t seq_length = 0;
};

struct BatchOptions {
  bool eod_mask_loss = false;  // dataset.eod_mask_loss
  int32_t eod_token = -1;      // the tokenizer's end-of-document id (synth corpus: 0)
};

// Fills `out` with the next out.num_sequences samples of `loader` and returns the loader position
// after them: the value a checkpoint taken after this batch's step must save (the trainer may have
// prefetched further batches, so it keeps this per buffer instead of asking the loader later).
DataPosition fill_batch(DataLoader& loader, const HostBatchView& out,
                        const BatchOptions& options = {});

}  // namespace sg::data
