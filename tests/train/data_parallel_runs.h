#pragma once
// Shared by the data-parallel GPU tests at world size 1 (data_parallel_gpu_test.cpp,
// data_parallel_overlap_gpu_test.cpp): a world of one rank over loopback, graph_runs' tiny recipe with
// overrides, and kDataParallelSteps training steps (plus two evaluations) through a backend, with the
// losses, grad norms, evaluation losses and the final state.
#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "config/config.h"
#include "config/model_config.h"
#include "dist/local_launcher.h"
#include "train/backend_factory.h"
#include "train/distributed_backend.h"
#include "train/distributed_run.h"
#include "train/gpu_backend.h"
#include "train/graph_mode_runs.h"
#include "train/mock_training.h"

namespace sg::train::dp_runs {

inline constexpr int64_t kSteps = 12;

// A world of one rank with its own rendezvous store on loopback: the train layer's whole path.
inline std::unique_ptr<DistributedRun> world_of_one() {
  dist::WorldInfo w;
  w.launcher = "test";
  w.master_addr = "127.0.0.1";
  w.master_port = dist::find_free_port();
  dist::RendezvousSettings s;
  s.timeout_seconds = 30.0;
  return std::make_unique<DistributedRun>(w, s);
}

// graph_runs' `recipe` (dropout on, two microbatches of 4, capture after 2 warmup steps) for kSteps steps.
inline config::Config recipe_steps_with(const std::string& recipe, const std::vector<std::string>& extra) {
  std::vector<std::string> overrides = {"train.train_iters=12", "train.eval_interval=6"};
  overrides.insert(overrides.end(), extra.begin(), extra.end());
  return graph_runs::recipe_with(recipe, overrides);
}
inline config::Config tiny_with(const std::vector<std::string>& extra) {
  return recipe_steps_with("llama/tiny", extra);
}

struct RunResult {
  std::vector<float> losses;
  std::vector<float> grad_norms;
  std::vector<double> eval_losses;
  int capture_steps = 0;  // steps that captured the graphs
  TrainingState state;
};

inline RunResult run(TrainingBackend& backend, const config::Config& config) {
  test::LoaderBatches batches(test::mock_data_options(config, config::model_spec(config)), config::model_spec(config),
                              config::batch_spec(config));
  RunResult out;
  const auto take = [&out](const std::vector<StepResult>& results) {
    for (const StepResult& r : results) {
      out.losses.push_back(r.loss);
      out.grad_norms.push_back(r.grad_norm);
      out.capture_steps += r.capture_step ? 1 : 0;
    }
  };
  for (int64_t step = 1; step <= kSteps; ++step) {
    backend.submit(batches.next());
    take(backend.collect(1));
  }
  take(backend.collect(0));
  // Two evaluations of the same two batches (with graphs on the second replays the evaluation graph and
  // its loss all-reduce).
  const model::HostBatch first = batches.next(), second = batches.next();
  for (int e = 0; e < 2; ++e) {
    backend.eval_submit(first);
    backend.eval_submit(second);
    out.eval_losses.push_back(backend.eval_collect().loss);
  }
  out.state = backend.state();
  return out;
}

inline RunResult run_single(const config::Config& config) {
  GpuBackend backend(config, config::model_spec(config), config::batch_spec(config), optimizer_spec(config),
                     {static_cast<uint64_t>(config.rng.seed), 0});
  return run(backend, config);
}

inline RunResult run_world_one(DistributedRun& world, const config::Config& config) {
  DistributedGpuBackend backend(world, config, config::model_spec(config), config::batch_spec(config),
                                optimizer_spec(config), {static_cast<uint64_t>(config.rng.seed), 0});
  return run(backend, config);
}

// `r` trained bitwise like `reference`: losses, grad norms, evaluation losses, fp32 weights, both moments and the
// generators' offset; its graphs captured once unless it ran eagerly (`eager`).
inline void expect_bitwise_same_run(const RunResult& r, const RunResult& reference, bool eager) {
  EXPECT_EQ(r.capture_steps, eager ? 0 : 1);
  EXPECT_TRUE(graph_runs::bitwise_equal(r.losses, reference.losses));
  EXPECT_TRUE(graph_runs::bitwise_equal(r.grad_norms, reference.grad_norms));
  EXPECT_EQ(r.eval_losses, reference.eval_losses) << "the evaluation through the reducer differs";
  EXPECT_TRUE(graph_runs::bitwise_equal(r.state.main_weights, reference.state.main_weights)) << "fp32 weights differ";
  EXPECT_TRUE(graph_runs::bitwise_equal(r.state.exp_avg, reference.state.exp_avg));
  EXPECT_TRUE(graph_runs::bitwise_equal(r.state.exp_avg_sq, reference.state.exp_avg_sq));
  EXPECT_EQ(r.state.rng.offset, reference.state.rng.offset);
}

}  // namespace sg::train::dp_runs
