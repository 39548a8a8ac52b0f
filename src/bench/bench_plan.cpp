#include "bench/bench_plan.h"

#include "core/strings.h"
#include "model/stack.h"
#include "train/backend_factory.h"
#include "train/run_plan.h"
#include "config/model_config.h"

namespace sg::bench {
namespace {

// The config with every key a graph mode may change reset, so two modes' configs can be compared for
// "same model, data and optimizer".
std::string without_graph_keys(config::Config config) {
  config.model.cuda_graph_impl = "none";
  config.model.cuda_graph_scope.clear();
  config.model.use_te_rng_tracker = false;
  config.rng.te_rng_tracker = false;
  config.rerun_state_machine.check_for_nan_in_loss = false;
  config.ddp.check_for_nan_in_grad = false;
  config.source.clear();
  return config::emit_yaml(config);
}

std::string violations_text(const std::string& label, const config::ValidationReport& report) {
  std::string text = strprintf("mode %s: the configuration breaks %zu rule(s):\n", label.c_str(),
                               report.violations.size());
  for (const config::Violation& v : report.violations) text += config::format_violation(v);
  return text;
}

const char* const kGraphKeys[] = {
    "model.cuda_graph_impl",   "model.cuda_graph_scope", "model.cuda_graph_warmup_steps",
    "model.use_te_rng_tracker", "rng.te_rng_tracker",    "rerun_state_machine.check_for_nan_in_loss",
    "ddp.check_for_nan_in_grad"};

}  // namespace

std::string mode_label(const config::Config& config) {
  const std::string& impl = config.model.cuda_graph_impl;
  const std::vector<std::string>& scope = config.model.cuda_graph_scope;
  if (impl == "none") return impl;
  if (impl == "local" && (scope.empty() || scope == std::vector<std::string>{"full_iteration"})) return impl;
  if (scope.empty()) return impl;
  return impl + ":" + join(scope, "+");
}

BenchPlan plan_bench(const BenchOptions& options) {
  check_bench_options(options);
  BenchPlan plan;
  plan.recipe = recipe_name(options);
  plan.options = options;
  plan.steps = options.steps;
  plan.floor_steps = options.floor_steps;
  plan.trace = !options.trace_path.empty();

  struct Candidate {
    std::string label;  // empty: from the normalized config
    CudaGraphFlags flags;
  };
  std::vector<Candidate> candidates;
  if (options.compare) {
    for (const GraphMode& mode : parse_mode_list(*options.compare)) candidates.push_back({mode.label(), graph_flags(mode)});
  } else {
    candidates.push_back({"", graph_flags(options)});
  }

  std::string problems;
  for (const Candidate& c : candidates) {
    config::Config raw = bench_config(options, c.flags);
    raw.data_parallel_size = options.num_gpus;  // -ng: one data-parallel rank per GPU
    config::ValidationReport report = config::validate(raw);
    const std::string label = c.label.empty() ? mode_label(report.config) : c.label;
    if (!report.ok()) {
      problems += violations_text(label, report);
      continue;
    }
    if (const auto missing = config::unimplemented_features(report.config); !missing.empty()) {
      problems += "mode " + label + ": not implemented yet: " + join(missing, "; ") + "\n";
      continue;
    }
    plan.modes.push_back({label, std::move(report.config), std::move(report.notes)});
  }
  if (!problems.empty()) {
    throw BenchConfigError("stepgraph bench " + plan.recipe + ": nothing was run.\n" + problems);
  }

  const config::Config& first = plan.modes.front().config;
  const std::string reference = without_graph_keys(first);
  for (const PlannedMode& mode : plan.modes) {
    // Only the CUDA-graph keys differ between modes (the flags and overrides are shared), so one model
    // and one memory plan serve them all. A difference here is a bug in the flag mapping.
    SG_CHECK(without_graph_keys(mode.config) == reference,
             "stepgraph bench: mode " + mode.label + " describes a different model or batch than mode " +
                 plan.modes.front().label + "; every compared mode must share them");
  }
  plan.model = config::model_spec(first);
  plan.batch = config::batch_spec(first);
  plan.optimizer = train::optimizer_spec(first);
  plan.seed = static_cast<uint64_t>(first.rng.seed);
  plan.warmup_steps = static_cast<int>(first.model.cuda_graph_warmup_steps);
  if (options.bridge.max_steps) {
    // Bridge's max_steps counts every optimizer step of the run: here warmup + capture + measured + floor.
    const int64_t measured = *options.bridge.max_steps - plan.warmup_steps - 1 - plan.floor_steps;
    if (measured < 1) {
      throw config::ConfigError(strprintf(
          "-ms/--max_steps %lld leaves no measured step: each mode runs %d warmup + 1 capture + %d floor steps "
          "before measuring; give at least %d",
          static_cast<long long>(*options.bridge.max_steps), plan.warmup_steps, plan.floor_steps,
          plan.warmup_steps + 2 + plan.floor_steps));
    }
    plan.steps = static_cast<int>(measured);
  }
  return plan;
}

std::string describe_plan(const BenchPlan& plan) {
  const model::ModelSpec& m = plan.model;
  const model::BatchSpec& b = plan.batch;
  std::string text = strprintf(
      "stepgraph bench %s: %s, hidden %lld, ffn %lld, %lld heads (%lld KV), seq %lld, vocab %lld; "
      "micro batch %lld x %lld microbatch%s x %lld data-parallel rank%s = %lld tokens per step; mock data, seed %llu\n",
      plan.recipe.c_str(), model::describe_stack(m).c_str(), static_cast<long long>(m.hidden_size),
      static_cast<long long>(m.ffn_hidden_size), static_cast<long long>(m.num_attention_heads),
      static_cast<long long>(m.num_query_groups), static_cast<long long>(m.seq_length),
      static_cast<long long>(m.vocab_size), static_cast<long long>(b.micro_batch_size),
      static_cast<long long>(b.num_microbatches), b.num_microbatches == 1 ? "" : "es",
      static_cast<long long>(b.data_parallel_size), b.data_parallel_size == 1 ? "" : "s",
      static_cast<long long>(b.global_microbatches() * b.tokens_per_microbatch(m)),
      static_cast<unsigned long long>(plan.seed));
  text += strprintf(
      "per mode: %d eager warmup step%s, 1 capture step (timed apart), %d measured step%s, %d CUPTI floor step%s%s "
      "(%d steps)\n",
      plan.warmup_steps, plan.warmup_steps == 1 ? "" : "s", plan.steps, plan.steps == 1 ? "" : "s", plan.floor_steps,
      plan.floor_steps == 1 ? "" : "s", plan.trace ? " (the first one traced)" : "", plan.steps_per_mode());
  text += train::describe_gpu_memory_plan(plan.modes.front().config) + "\n";
  if (!plan.options.bridge.ignored.empty()) {
    text += "ignored (Megatron-Bridge launcher flags; they do not change what runs here): " +
            join(plan.options.bridge.ignored, " ") + "\n";
  }
  // Activation recompute is a recipe override shared by every compared mode (one memory plan).
  text += train::describe_activation_plan(plan.modes.front().config) + "\n";
  for (const PlannedMode& mode : plan.modes) {
    text += "mode " + mode.label + ":\n";
    for (const char* key : kGraphKeys) text += strprintf("  %s = %s\n", key, config::format_value(mode.config, key).c_str());
    text += "  " + train::describe_graph_plan(mode.config) + "\n";
    for (const config::Note& note : mode.notes) text += "  " + config::format_note(note);
  }
  return text;
}

}  // namespace sg::bench
