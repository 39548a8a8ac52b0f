#include "train/batch_source.h"

#include "train/data_options.h"

namespace sg::train {

BatchSource::BatchSource(const config::Config& config, const model::ModelSpec& model, const model::BatchSpec& batch,
                         const data::BatchOptions& options, const DataRank& rank)
    : loader_(training_data_options(config, model, rank.scan_share)),
      model_(model),
      batch_(batch),
      options_(options),
      global_sequences_(batch.global_microbatches() * batch.micro_batch_size),
      rows_(data::rank_rows(global_sequences_, batch.data_parallel_size, rank.rank)) {
  const size_t n = static_cast<size_t>(batch.num_microbatches * batch.tokens_per_microbatch(model));
  host_.tokens.resize(n);
  host_.targets.resize(n);
  host_.loss_mask.resize(n);
}

const model::HostBatch& BatchSource::next() {
  data::HostBatchView view{host_.tokens.data(), host_.targets.data(), host_.loss_mask.data(),
                           batch_.num_microbatches * batch_.micro_batch_size, model_.seq_length};
  data::fill_rank_batch(loader_, view, global_sequences_, rows_, options_);
  return host_;
}

}  // namespace sg::train
