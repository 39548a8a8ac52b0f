#include "train/data_options.h"

#include "data/dataset_split.h"
#include "data/shuffle.h"

namespace sg::train {

namespace {

data::DataLoaderOptions common_options(const config::Config& config, const model::ModelSpec& model, uint64_t seed,
                                       const data::ScanShare& scan_share) {
  data::DataLoaderOptions o;
  o.scan_share = scan_share;
  o.data_path = config.dataset.data_path;
  o.mock = config.dataset.mock;
  o.seq_length = model.seq_length;
  o.vocab_size = model.vocab_size;
  o.seed = seed;
  return o;
}

// dataset.split's share `which` of dataset.data_path; nothing without the key or with mock tokens (no files).
void read_split(const config::Config& config, data::Split which, data::DataLoaderOptions& o) {
  if (!config.dataset.split || config.dataset.mock) return;
  o.split_shares = data::parse_split(*config.dataset.split);
  o.split = which;
}

}  // namespace

data::DataLoaderOptions training_data_options(const config::Config& config, const model::ModelSpec& model,
                                              const data::ScanShare& scan_share) {
  data::DataLoaderOptions o = common_options(config, model, static_cast<uint64_t>(config.rng.seed), scan_share);
  read_split(config, data::Split::train, o);
  return o;
}

data::DataLoaderOptions validation_data_options(const config::Config& config, const model::ModelSpec& model,
                                                const std::string& set_prefix, const data::ScanShare& scan_share) {
  // Another stream than training's, also for mock data ("valid" as the mixing word).
  data::DataLoaderOptions o = common_options(
      config, model, data::mix_seed(static_cast<uint64_t>(config.rng.seed), 0x76616c6964ull), scan_share);
  if (!config.dataset.valid_data_path.empty()) {
    o.data_path = config.dataset.valid_data_path;
    o.data_path_key = "dataset.valid_data_path";
  } else {
    read_split(config, data::Split::valid, o);
  }
  // The whole set, each window once: an unweighted blend's stream takes its datasets in proportion to their windows.
  o.blend_by_windows = config.validation.full_validation;
  if (!set_prefix.empty()) o.data_path = {set_prefix};  // its split share, as in the blend
  return o;
}

bool has_test_data(const config::Config& config) {
  if (!config.dataset.split || config.dataset.mock || config.dataset.data_path.empty()) return false;
  return data::parse_split(*config.dataset.split)[2] > 0.0;
}

data::DataLoaderOptions test_data_options(const config::Config& config, const model::ModelSpec& model,
                                          const data::ScanShare& scan_share) {
  data::DataLoaderOptions o = common_options(
      config, model, data::mix_seed(static_cast<uint64_t>(config.rng.seed), 0x74657374ull), scan_share);  // "test"
  read_split(config, data::Split::test, o);
  return o;
}

}  // namespace sg::train
