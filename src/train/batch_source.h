#pragma once
// The training input of one data-parallel rank, on the host: its loader and the batch it fills.
#include <cstdint>

#include "config/config.h"
#include "data/batch.h"
#include "data/blended_dataset.h"
#include "data/rank_batch.h"
#include "model/batch.h"
#include "model/spec.h"
#include "train/data_options.h"

namespace sg::train {

// Owns the host side of the input pipeline: the loader and the batch it fills — this data-parallel rank's
// rows of every global batch (data/rank_batch.h; all of them at world size 1).
class BatchSource {
 public:
  BatchSource(const config::Config& config, const model::ModelSpec& model, const model::BatchSpec& batch,
              const data::BatchOptions& options, const DataRank& rank);
  const model::HostBatch& next();
  data::DataLoader& loader() { return loader_; }

 private:
  data::DataLoader loader_;
  model::ModelSpec model_;
  model::BatchSpec batch_;
  data::BatchOptions options_;
  int64_t global_sequences_;
  data::RankRows rows_;
  model::HostBatch host_;
};

}  // namespace sg::train
