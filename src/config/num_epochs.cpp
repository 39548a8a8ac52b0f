#include "config/num_epochs.h"

#include <cmath>
#include <string>

#include "core/error.h"
#include "core/strings.h"
#include "data/blended_dataset.h"
#include "data/dataset_split.h"

namespace sg::config {

void resolve_num_epochs(Config& config, std::vector<Violation>& violations, std::vector<Note>& notes) {
  const std::optional<double> epochs = config.train.num_epochs;
  if (!epochs) return;
  const auto fail = [&](const std::string& message, const std::vector<std::string>& keys, const std::string& fix) {
    violations.push_back({16, message, detail::key_values(config, keys), fix});
  };
  if (!std::isfinite(*epochs) || *epochs <= 0.0) {
    fail("train.num_epochs must be a positive number", {"train.num_epochs"}, "set the passes over the data, or null");
    return;
  }
  if (config.train.train_iters || config.train.train_samples) {
    fail(
        "train.num_epochs, train.train_iters and train.train_samples each give the run's length (Bridge refuses "
        "more than one)",
        {"train.num_epochs", "train.train_iters", "train.train_samples"},
        "keep one: add train.train_iters=null (and train.train_samples=null) to train by epochs");
    return;
  }
  const DatasetConfig& d = config.dataset;
  if (d.mock) {
    fail("train.num_epochs counts passes over dataset.data_path, and dataset.mock is an endless stream",
         {"train.num_epochs", "dataset.mock"}, "train on your data (dataset.mock=false dataset.data_path=[PREFIX])");
    return;
  }
  const int64_t gbs = config.train.global_batch_size.value_or(0);
  const int64_t seq_length = d.seq_length.value_or(config.model.seq_length);
  if (gbs < 1 || seq_length < 1 || d.data_path.empty()) return;  // each is reported under its own key
  data::DataLoaderOptions options;
  options.data_path = d.data_path;
  options.seq_length = seq_length;
  uint64_t samples = 0;
  try {
    // A data_path or split that does not parse, or a dataset that is missing, is reported once, by the data checks
    // (validate_data.cpp), not again here.
    if (d.split) options.split_shares = data::parse_split(*d.split);
    for (const data::WeightedPrefix& p : data::parse_data_path(d.data_path)) data::check_dataset_exists(p.prefix);
  } catch (const Error&) {
    return;
  }
  try {
    samples = data::samples_per_epoch(options);
  } catch (const Error& e) {
    fail(std::string("train.num_epochs needs the samples of an epoch: ") + e.what(),
         {"train.num_epochs", "dataset.data_path", "dataset.split"},
         "train an unweighted dataset.data_path of existing datasets, or give train.train_iters");
    return;
  }
  const auto per_epoch = (samples + static_cast<uint64_t>(gbs) - 1) / static_cast<uint64_t>(gbs);
  const auto steps = static_cast<int64_t>(std::ceil(*epochs * static_cast<double>(per_epoch)));
  config.train.train_iters = steps;
  config.derived_keys.push_back("train.train_iters");
  notes.push_back({16,
                   strprintf("train.num_epochs %g: %lld steps (%llu samples per epoch%s, %llu steps of %lld "
                             "sequences each, as Bridge rounds up)",
                             *epochs, static_cast<long long>(steps), static_cast<unsigned long long>(samples),
                             d.split ? " in the train split" : "", static_cast<unsigned long long>(per_epoch),
                             static_cast<long long>(gbs)),
                   detail::key_values(config, {"train.num_epochs", "train.train_iters", "train.global_batch_size"})});
}

}  // namespace sg::config
