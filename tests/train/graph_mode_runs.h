#pragma once
// Shared by the graph-mode GPU tests (graph_modes_gpu_test.cpp, moe_graph_modes_gpu_test.cpp): a
// recipe with overrides, validated; a run of kSteps training steps through GpuBackend on mock data,
// with the losses, the final state and the graph statistics.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "config/config.h"
#include "config/model_config.h"
#include "config/validate.h"
#include "data/batch.h"
#include "data/blended_dataset.h"
#include "train/backend_factory.h"
#include "train/gpu_backend.h"
#include "train/mock_training.h"
#include "train/trainer.h"

namespace sg::train::graph_runs {

constexpr int64_t kSteps = 30;

// `recipe` with dropout 0.1 everywhere, two microbatches of 4, kSteps steps on mock data, 2 warmup
// steps before capture, then `extra`.
inline config::Config recipe_with(const std::string& recipe, const std::vector<std::string>& extra) {
  std::vector<std::string> overrides = {"model.attention_dropout=0.1", "model.hidden_dropout=0.1",
                                        "train.global_batch_size=8",  // two microbatches of 4
                                        "train.train_iters=30",       "dataset.mock=true",
                                        "model.cuda_graph_warmup_steps=2"};
  overrides.insert(overrides.end(), extra.begin(), extra.end());
  const config::ValidationReport report = config::validate(config::load_config(recipe, overrides));
  EXPECT_TRUE(report.ok()) << (report.violations.empty() ? "" : config::format_violation(report.violations[0]));
  return report.config;
}


struct RunResult {
  std::vector<float> losses;
  std::vector<float> aux_losses, z_losses;  // MoE auxiliary losses per step
  TrainingState state;
  graph::GraphStats stats;
  int64_t graph_memory = -1;
  size_t arena_bytes = 0;
  void add(const StepResult& r) {
    losses.push_back(r.loss);
    aux_losses.push_back(r.aux_loss);
    z_losses.push_back(r.z_loss);
  }
};

// `initial`: start from these weights instead of the model's own initialisation.
inline RunResult run_mode(const config::Config& config, const std::vector<float>* initial = nullptr) {
  const model::ModelSpec model = config::model_spec(config);
  const model::BatchSpec batch = config::batch_spec(config);
  GpuBackend backend(config, model, batch, optimizer_spec(config), {static_cast<uint64_t>(config.rng.seed), 0});
  if (initial != nullptr) {
    TrainingState start;
    start.main_weights = *initial;
    start.exp_avg.assign(initial->size(), 0.0f);
    start.exp_avg_sq.assign(initial->size(), 0.0f);
    start.rng = {static_cast<uint64_t>(config.rng.seed), 0};
    backend.load_state(start);
  }
  sg::test::LoaderBatches batches(sg::test::mock_data_options(config, model), model, batch);
  RunResult out;
  for (int64_t step = 1; step <= kSteps; ++step) {
    backend.submit(batches.next());
    for (const StepResult& r : backend.collect(1)) out.add(r);
  }
  for (const StepResult& r : backend.collect(0)) out.add(r);
  out.state = backend.state();
  out.stats = backend.graph_stats();
  out.graph_memory = backend.graph_memory_bytes();
  out.arena_bytes = backend.step().arena().total_bytes();
  return out;
}

inline bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace sg::train::graph_runs
