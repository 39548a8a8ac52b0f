#pragma once
// Shared by the graph-mode GPU tests (graph_modes_gpu_test.cpp, moe_graph_modes_gpu_test.cpp,
// graph_modes_recompute_kinds_gpu_test.cpp): a
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

// "equal", or how many elements differ and the first of them.
inline std::string bits_diff(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return "sizes differ";
  size_t n = 0, first = a.size();
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::memcmp(&a[i], &b[i], 4) != 0) {
      if (n++ == 0) first = i;
    }
  }
  return n == 0 ? "equal" : std::to_string(n) + " elements differ, first at " + std::to_string(first) + ": " +
                                std::to_string(a[first]) + " vs " + std::to_string(b[first]);
}

// `r` trained bit for bit as `reference`: every loss, auxiliary loss and z-loss, the final weights and
// Adam moments, the step count and the generator offset (gtest expectations).
inline void expect_bitwise_same_run(const RunResult& r, const RunResult& reference, const char* reference_name) {
  ASSERT_EQ(r.losses.size(), reference.losses.size());
  const auto same = [&](const std::vector<float>& a, const std::vector<float>& b, size_t i, const char* what) {
    EXPECT_EQ(std::memcmp(&a[i], &b[i], 4), 0)
        << "step " << i + 1 << ": " << what << " " << a[i] << " vs " << reference_name << " " << b[i];
  };
  for (size_t i = 0; i < r.losses.size(); ++i) {
    same(r.losses, reference.losses, i, "loss");
    same(r.aux_losses, reference.aux_losses, i, "aux loss");
    same(r.z_losses, reference.z_losses, i, "z loss");
  }
  EXPECT_TRUE(bitwise_equal(r.state.main_weights, reference.state.main_weights))
      << "final fp32 weights: " << bits_diff(r.state.main_weights, reference.state.main_weights);
  EXPECT_TRUE(bitwise_equal(r.state.exp_avg, reference.state.exp_avg))
      << "final exp_avg: " << bits_diff(r.state.exp_avg, reference.state.exp_avg);
  EXPECT_TRUE(bitwise_equal(r.state.exp_avg_sq, reference.state.exp_avg_sq))
      << "final exp_avg_sq: " << bits_diff(r.state.exp_avg_sq, reference.state.exp_avg_sq);
  EXPECT_EQ(r.state.steps_done, reference.state.steps_done);
  EXPECT_EQ(r.state.rng.offset, reference.state.rng.offset);
}

}  // namespace sg::train::graph_runs
