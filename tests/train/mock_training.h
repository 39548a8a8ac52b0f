#pragma once
// Shared by the GPU training tests: a recipe (llama/tiny) validated with overrides, and global batches from a
// data loader (e.g. the mock batches the trainer feeds for dataset.mock, seeded with rng.seed).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "config/config.h"
#include "config/validate.h"
#include "data/batch.h"
#include "data/blended_dataset.h"
#include "model/batch.h"
#include "model/spec.h"

namespace sg::test {

inline config::Config validated_recipe(const std::string& recipe, const std::vector<std::string>& overrides) {
  const config::ValidationReport report = config::validate(config::load_config(recipe, overrides));
  EXPECT_TRUE(report.ok()) << (report.violations.empty() ? "" : config::format_violation(report.violations[0]));
  return report.config;
}

inline config::Config validated_tiny(const std::vector<std::string>& overrides) {
  return validated_recipe("llama/tiny", overrides);
}

// The loader options of dataset.mock for `config`, as the trainer makes them.
inline data::DataLoaderOptions mock_data_options(const config::Config& config, const model::ModelSpec& model) {
  data::DataLoaderOptions o;
  o.mock = true;
  o.seq_length = model.seq_length;
  o.vocab_size = model.vocab_size;
  o.seed = static_cast<uint64_t>(config.rng.seed);
  return o;
}

// One global batch per next() from the loader.
class LoaderBatches {
 public:
  LoaderBatches(const data::DataLoaderOptions& options, const model::ModelSpec& model, const model::BatchSpec& batch)
      : loader_(options),
        sequences_(batch.num_microbatches * batch.micro_batch_size),
        seq_length_(model.seq_length) {
    const size_t n = static_cast<size_t>(batch.num_microbatches * batch.tokens_per_microbatch(model));
    host_.tokens.resize(n);
    host_.targets.resize(n);
    host_.loss_mask.resize(n);
  }
  const model::HostBatch& next() {
    data::fill_batch(loader_, {host_.tokens.data(), host_.targets.data(), host_.loss_mask.data(), sequences_,
                               seq_length_});
    return host_;
  }

 private:
  data::DataLoader loader_;
  int64_t sequences_, seq_length_;
  model::HostBatch host_;
};

}  // namespace sg::test
