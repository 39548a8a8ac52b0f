#pragma once
// For GPU tests that train llama/tiny through a backend and compare runs bit for bit
// (dist/data_parallel_gpu_test.cpp): the config and the step loop.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>
#include <vector>

#include "config/config.h"
#include "config/model_config.h"
#include "config/validate.h"
#include "data/batch.h"
#include "data/blended_dataset.h"
#include "train/backend.h"

namespace sg::test {

// llama/tiny with both dropouts (so the graph-safe RNG matters), two microbatches of 4, mock data and 2
// eager warmup steps, then `extra`; validated (a violation fails the calling test).
inline config::Config tiny_two_microbatches(const std::vector<std::string>& extra, int64_t train_iters) {
  std::vector<std::string> overrides = {"model.attention_dropout=0.1",
                                        "model.hidden_dropout=0.1",
                                        "train.global_batch_size=8",  // two microbatches of 4
                                        "train.train_iters=" + std::to_string(train_iters),
                                        "dataset.mock=true",
                                        "model.cuda_graph_warmup_steps=2"};
  overrides.insert(overrides.end(), extra.begin(), extra.end());
  const config::ValidationReport report = config::validate(config::load_config("llama/tiny", overrides));
  EXPECT_TRUE(report.ok()) << (report.violations.empty() ? "" : config::format_violation(report.violations[0]));
  return report.config;
}

// `steps` steps of the config's mock data through `backend`, one step in flight as the trainer runs
// them; every step's result in step order.
inline std::vector<train::StepResult> run_mock_steps(train::TrainingBackend& backend, const config::Config& config,
                                                     int64_t steps) {
  const model::ModelSpec model = config::model_spec(config);
  const model::BatchSpec batch = config::batch_spec(config);
  data::DataLoaderOptions o;
  o.mock = true;
  o.seq_length = model.seq_length;
  o.vocab_size = model.vocab_size;
  o.seed = static_cast<uint64_t>(config.rng.seed);
  data::DataLoader loader(o);
  model::HostBatch host;
  const size_t n = static_cast<size_t>(batch.num_microbatches * batch.tokens_per_microbatch(model));
  host.tokens.resize(n);
  host.targets.resize(n);
  host.loss_mask.resize(n);
  std::vector<train::StepResult> out;
  const auto take = [&out](const std::vector<train::StepResult>& results) {
    out.insert(out.end(), results.begin(), results.end());
  };
  for (int64_t step = 1; step <= steps; ++step) {
    data::fill_batch(loader, {host.tokens.data(), host.targets.data(), host.loss_mask.data(),
                              batch.num_microbatches * batch.micro_batch_size, model.seq_length});
    backend.submit(host);
    take(backend.collect(1));
  }
  take(backend.collect(0));
  return out;
}

}  // namespace sg::test
