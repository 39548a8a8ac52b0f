#pragma once
// What `stepgraph bench` will run, decided on the CPU before any GPU work: one validated config per
// mode, all describing the same model, batch, optimizer and seed. Only the CUDA-graph keys and the
// activation-recompute keys differ. Recompute changes the memory plan, so the modes fall into memory
// plans (one per distinct recompute setting): modes of one plan may share a TrainStep and its arena,
// modes of different plans each get their own, allocated after the previous one is freed, so each
// mode's peak memory is its own.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "model/activation_account.h"
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
  std::string label;  // "none", "local", "transformer_engine:attn+mlp", "local+recompute_full"
  config::Config config;      // validated and normalized
  std::vector<config::Note> notes;
  model::ModelSpec model;     // this mode's model: BenchPlan::model with this mode's recompute settings
  std::string recompute;      // recompute_setting(config): "none", "selective=core_attn", "full=uniform/1"
  size_t memory_plan = 0;     // index into BenchPlan::memory_plans
  // The listed mode with the same CUDA-graph keys and recompute off, when this mode recomputes
  // something: what its memory and step time are compared against.
  std::optional<size_t> without_recompute;
};

// One distinct memory plan: the modes that run on it, and its sizes planned on the CPU.
struct MemoryPlanSummary {
  std::vector<size_t> modes;           // indices into BenchPlan::modes, in order
  uint64_t planned_bytes = 0;          // TrainStep::plan_memory: the arena without the device-sized workspaces
  model::ActivationAccount activations;  // per microbatch, with and without recompute
};

struct BenchPlan {
  std::string recipe;  // "llama/tiny"
  BenchOptions options;
  std::vector<PlannedMode> modes;
  std::vector<MemoryPlanSummary> memory_plans;  // in order of first use; at least one
  model::ModelSpec model;  // the first mode's (shapes, FLOPs); each mode's own recompute is in modes[i].model
  model::BatchSpec batch;
  model::OptimizerSpec optimizer;
  uint64_t seed = 0;
  int warmup_steps = 0;  // model.cuda_graph_warmup_steps: eager steps before the capture step
  int steps = 0;         // measured steps per mode
  int floor_steps = 0;   // CUPTI-traced steps per mode (0: no floor)
  bool power = true;     // sample board power and SM clock during the measured steps (--no-power: false)
  bool trace = false;

  // Steps each mode runs: warmup + the capture step + measured + floor. Equal for every mode, so every
  // mode ends at the same optimizer step and (graphs being bitwise equal to eager) the same loss.
  // In 64 bits: each count is at most kMaxStepsPerMode, the sum never wraps.
  int64_t steps_per_mode() const {
    return static_cast<int64_t>(warmup_steps) + 1 + static_cast<int64_t>(steps) + static_cast<int64_t>(floor_steps);
  }
};

// check_bench_options, then one config per mode (--compare, or the single mode of the flags), each
// validated. Throws ConfigError (exit 2) for bad flags/recipes/overrides or two compared modes that run
// the same configuration, BenchConfigError (exit 1) for rule violations or unimplemented features,
// listing them all (a key set by a flag, -gb, -rl, ..., is named by its flag, which wins over overrides).
// Rule 15's note about train.train_iters is dropped: the bench runs its own step count.
BenchPlan plan_bench(const BenchOptions& options);

// The label of a single-mode run from its normalized config: "none", "local",
// "transformer_engine:attn+mlp".
std::string mode_label(const config::Config& config);

// Human-readable plan (--dryrun): the recipe, model and batch, the step schedule, the GPU memory plan of
// each distinct memory plan, and per mode the CUDA-graph and recompute keys as they will run, its
// activation plan (bytes with and without recompute), its planned arena against the mode without
// recompute, and the validator's notes.
std::string describe_plan(const BenchPlan& plan);

}  // namespace sg::bench
