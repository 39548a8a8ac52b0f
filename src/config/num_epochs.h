#pragma once
// Bridge's train.num_epochs: the run's length as passes over the training data, instead of train.train_iters or
// train.train_samples (Bridge refuses more than one). Bridge's _resolve_num_epochs: train_iters =
// ceil(num_epochs x ceil(samples per epoch / global_batch_size)). stepgraph counts the samples of an epoch from the
// index files of dataset.data_path (its train share with dataset.split; data::samples_per_epoch), at validation, so
// the run plan, the decay's default length and the checkpoints see the steps it makes.
#include <vector>

#include "config/config.h"
#include "config/validate.h"

namespace sg::config {

// Checks train.num_epochs and, when the data gives an epoch, derives train.train_iters from it (a note says how).
// global_batch_size is resolved already; before the sample-based lengths and the decay's default.
void resolve_num_epochs(Config& config, std::vector<Violation>& violations, std::vector<Note>& notes);

}  // namespace sg::config
