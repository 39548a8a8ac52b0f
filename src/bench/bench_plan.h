#pragma once
// What `stepgraph bench` will run, decided on the CPU before any GPU work: one validated config per
// mode, all describing the same model, batch, optimizer and seed (only the CUDA-graph keys differ), so
// ONE TrainStep — one memory plan, one arena — serves every mode.
#include <cstdint>
#include <string>
#include <vector>

#include "core/error.h"
#include "model/spec.h"
#include "bench/bench_options.h"
#include "config/config.h"
#include "config/validate.h"

namespace sg::bench {

// The configuration breaks validation rules (or asks for what is not implemented yet): exit 1, with
// every violation of every mode in the message.
class BenchConfigError : public Error {
 public:
  explicit BenchConfigError(const std::string& message) : Error(message) {}
};

struct PlannedMode {
  std::string label;  // "none", "local", "transformer_engine:attn+mlp"
  config::Config config;      // validated and normalized
  std::vector<config::Note> notes;
};

struct BenchPlan {
  std::string recipe;  // "llama/tiny"
  BenchOptions options;
  std::vector<PlannedMode> modes;
  model::ModelSpec model;
  model::BatchSpec batch;
  model::OptimizerSpec optimizer;
  uint64_t seed = 0;
  int warmup_steps = 0;  // model.cuda_graph_warmup_steps: eager steps before the capture step
  int steps = 0;         // measured steps per mode
  int floor_steps = 0;   // CUPTI-traced steps per mode (0: no floor)
  bool trace = false;

  // Steps each mode runs: warmup + the capture step + measured + floor. Equal for every mode, so every
  // mode ends at the same optimizer step and (graphs being bitwise equal to eager) the same loss.
  int steps_per_mode() const { return warmup_steps + 1 + steps + floor_steps; }
};

// check_bench_options, then one config per mode (--compare, or the single mode of the flags), each
// validated. Throws ConfigError (exit 2) for bad flags/recipes/overrides, BenchConfigError (exit 1)
// for rule violations or unimplemented features, listing them all.
BenchPlan plan_bench(const BenchOptions& options);

// The label of a single-mode run from its normalized config: "none", "local",
// "transformer_engine:attn+mlp".
std::string mode_label(const config::Config& config);

// Human-readable plan (--dryrun): the recipe, model and batch, the step schedule, and per mode the
// CUDA-graph keys as they will run, with the validator's notes.
std::string describe_plan(const BenchPlan& plan);

}  // namespace sg::bench
