#pragma once
// What the data loaders read, from a validated config: the one place that reads dataset.* for them.
//   training     dataset.data_path (its dataset.split train share when the key is set), or mock tokens
//   validation   dataset.valid_data_path whole, else dataset.data_path's valid share; its own seed stream,
//                also for mock tokens; with validation.multiple_validation_sets one dataset of them (a set)
//   test         dataset.data_path's test share (dataset.split's third), its own seed stream; none with mock tokens
#include <string>

#include "config/config.h"
#include "data/blended_dataset.h"
#include "model/spec.h"

namespace sg::train {

// The data-parallel rank a loader reads for, and how the ranks share the scan of each corpus they open
// (data/token_scan_share.h; train/distributed_run.h corpus_scan_share).
struct DataRank {
  int rank = 0;
  data::ScanShare scan_share;  // default: this process scans each corpus whole
};

// `scan_share`: the ranks' shares of each corpus's scan at open (DataRank::scan_share); default: scanned whole.
data::DataLoaderOptions training_data_options(const config::Config& config, const model::ModelSpec& model,
                                              const data::ScanShare& scan_share = {});
// `set_prefix`: one dataset of the validation data (config/validation_sets.h); "" for all of it.
data::DataLoaderOptions validation_data_options(const config::Config& config, const model::ModelSpec& model,
                                                const std::string& set_prefix = "",
                                                const data::ScanShare& scan_share = {});
// Whether there is test data: dataset.split gives its third share documents of dataset.data_path (not mock).
bool has_test_data(const config::Config& config);
data::DataLoaderOptions test_data_options(const config::Config& config, const model::ModelSpec& model,
                                          const data::ScanShare& scan_share = {});

}  // namespace sg::train
