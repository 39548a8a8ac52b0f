#pragma once
// Recompute settings and CPU training runs shared by the CPU recompute tests (recompute_test.cpp,
// recompute_kinds_test.cpp): two microbatches of 2, lr 1e-2, random batches; what a run leaves behind
// is compared bit for bit against the same run without recompute.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "model/cpu_model.h"
#include "model/recompute_spec.h"
#include "tiny_model.h"

namespace sg::test {

inline model::RecomputeSpec selective(std::vector<model::RecomputeModule> modules) {
  model::RecomputeSpec r;
  r.granularity = model::RecomputeGranularity::selective;
  r.modules = std::move(modules);
  return r;
}

inline model::RecomputeSpec full(model::RecomputeMethod method, int64_t layers) {
  model::RecomputeSpec r;
  r.granularity = model::RecomputeGranularity::full;
  r.method = method;
  r.num_layers = layers;
  return r;
}

struct TrainedRun {
  std::vector<float> losses, aux_losses, z_losses, grad_norms;
  std::vector<float> weights, exp_avg, exp_avg_sq;
};

// `steps` steps of the CPU model on random batches (seeds data_seed, data_seed + 1, ...).
inline TrainedRun train_cpu(const model::ModelSpec& spec, int steps, uint64_t data_seed) {
  model::BatchSpec batch;
  batch.micro_batch_size = 2;
  batch.num_microbatches = 2;
  model::OptimizerSpec opt;
  opt.lr = 1e-2;
  model::CpuModel cpu(spec, batch, opt, rng::RngState{4321, 0});
  TrainedRun r;
  for (int step = 0; step < steps; ++step) {
    const model::CpuStepResult s = cpu.train_step(random_batch(spec, batch, data_seed + static_cast<uint64_t>(step)));
    r.losses.push_back(s.loss);
    r.aux_losses.push_back(s.aux_loss);
    r.z_losses.push_back(s.z_loss);
    r.grad_norms.push_back(s.grad_norm);
  }
  r.weights = cpu.weights();
  r.exp_avg = cpu.exp_avg();
  r.exp_avg_sq = cpu.exp_avg_sq();
  return r;
}

// Every number of `got` bit for bit as `plain` (gtest expectations).
inline void expect_same_training(const TrainedRun& got, const TrainedRun& plain) {
  EXPECT_EQ(got.losses, plain.losses);
  EXPECT_EQ(got.aux_losses, plain.aux_losses);
  EXPECT_EQ(got.z_losses, plain.z_losses);
  EXPECT_EQ(got.grad_norms, plain.grad_norms);
  EXPECT_EQ(got.weights, plain.weights);
  EXPECT_EQ(got.exp_avg, plain.exp_avg);
  EXPECT_EQ(got.exp_avg_sq, plain.exp_avg_sq);
}

}  // namespace sg::test
