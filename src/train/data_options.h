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

data::DataLoaderOptions training_data_options(const config::Config& config, const model::ModelSpec& model);
// `set_prefix`: one dataset of the validation data (config/validation_sets.h); "" for all of it.
data::DataLoaderOptions validation_data_options(const config::Config& config, const model::ModelSpec& model,
                                                const std::string& set_prefix = "");
// Whether there is test data: dataset.split gives its third share documents of dataset.data_path (not mock).
bool has_test_data(const config::Config& config);
data::DataLoaderOptions test_data_options(const config::Config& config, const model::ModelSpec& model);

}  // namespace sg::train
