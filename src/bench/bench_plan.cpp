#include "bench/bench_plan.h"

#include <algorithm>
#include <utility>

#include "core/strings.h"
#include "model/stack.h"
#include "model/train_step.h"
#include "bench/report.h"
#include "train/backend_factory.h"
#include "train/run_plan.h"
#include "config/graph_keys.h"
#include "config/model_config.h"

namespace sg::bench {
namespace {

// The config with every key a compared mode may change reset (the CUDA-graph keys and the recompute
// keys), so two modes' configs can be compared for "same model, data and optimizer".
std::string shared_part(config::Config config) {
  config.model.cuda_graph_impl = graph::graph_impl_name(graph::GraphImpl::none);
  config.model.cuda_graph_scope.clear();
  config.model.use_te_rng_tracker = false;
  config.rng.te_rng_tracker = false;
  config.rerun_state_machine.check_for_nan_in_loss = false;
  config.ddp.check_for_nan_in_grad = false;
  config.model.recompute_granularity.reset();
  config.model.recompute_modules = config::ModelConfig{}.recompute_modules;
  config.model.recompute_method.reset();
  config.model.recompute_num_layers.reset();
  config.source.clear();
  return config::emit_yaml(config);
}

// Config keys set by flags, which win over the recipe and the overrides: a fix must name the flag
// ("set -gb to a multiple of 8"), since setting the key would change nothing.
std::vector<std::pair<std::string, std::string>> flag_keys(const BenchOptions& o) {
  std::vector<std::pair<std::string, std::string>> keys = o.bridge.key_flags;
  if (o.micro_batch_size) keys.emplace_back("train.micro_batch_size", "-mb");
  if (o.global_batch_size) keys.emplace_back("train.global_batch_size", "-gb");
  if (o.seq_length) {
    keys.emplace_back("model.seq_length", "-sl");
    keys.emplace_back("dataset.seq_length", "-sl");
  }
  if (o.warmup) keys.emplace_back("model.cuda_graph_warmup_steps", "--warmup");
  return keys;
}

std::string replace_all(std::string text, const std::string& from, const std::string& to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
  return text;
}

std::string violations_text(const std::string& label, const config::ValidationReport& report,
                            const BenchOptions& options) {
  std::string text = strprintf("mode %s: the configuration breaks %zu rule(s):\n", label.c_str(),
                               report.violations.size());
  const auto keys = flag_keys(options);
  for (config::Violation v : report.violations) {
    for (config::KeyValue& kv : v.values) {
      for (const auto& [key, flag] : keys) {
        if (kv.key != key) continue;
        kv.value += " (set by " + flag + ")";
        v.fix = replace_all(v.fix, key, flag);
      }
    }
    text += config::format_violation(v);
  }
  return text;
}

// What makes two modes the same run: their validated configs with the orders that do not matter sorted
// (scopes, selective modules) and the keys their recompute granularity does not read reset.
std::string run_identity(config::Config config) {
  config::ModelConfig& m = config.model;
  std::sort(m.cuda_graph_scope.begin(), m.cuda_graph_scope.end());
  m.cuda_graph_scope.erase(std::unique(m.cuda_graph_scope.begin(), m.cuda_graph_scope.end()), m.cuda_graph_scope.end());
  if (config::recompute_granularity(m) == model::RecomputeGranularity::selective) {
    std::sort(m.recompute_modules.begin(), m.recompute_modules.end());
  } else {
    m.recompute_modules.clear();
  }
  if (config::recompute_granularity(m) != model::RecomputeGranularity::full) {
    m.recompute_method.reset();
    m.recompute_num_layers.reset();
  }
  config.source.clear();
  return config::emit_yaml(config);
}

const char* const kGraphKeys[] = {
    "model.cuda_graph_impl",   "model.cuda_graph_scope", "model.cuda_graph_warmup_steps",
    "model.use_te_rng_tracker", "rng.te_rng_tracker",    "rerun_state_machine.check_for_nan_in_loss",
    "ddp.check_for_nan_in_grad"};
const char* const kRecomputeKeys[] = {"model.recompute_granularity", "model.recompute_modules",
                                      "model.recompute_method", "model.recompute_num_layers"};

// Groups the modes by memory plan (one per distinct recompute setting) and pairs each recomputing mode
// with the listed mode of the same graph keys that recomputes nothing.
void assign_memory_plans(BenchPlan& plan) {
  for (size_t i = 0; i < plan.modes.size(); ++i) {
    PlannedMode& mode = plan.modes[i];
    std::optional<size_t> found;
    for (size_t p = 0; p < plan.memory_plans.size() && !found; ++p) {
      if (plan.modes[plan.memory_plans[p].modes.front()].recompute == mode.recompute) found = p;
    }
    if (!found) {
      MemoryPlanSummary summary;
      summary.planned_bytes =
          model::TrainStep::plan_memory(mode.model, plan.batch, {}, train::optimizer_spec(mode.config)).layout().total_bytes;
      summary.activations = model::activation_account(mode.model, plan.batch);
      plan.memory_plans.push_back(std::move(summary));
      found = plan.memory_plans.size() - 1;
    }
    mode.memory_plan = *found;
    plan.memory_plans[*found].modes.push_back(i);
  }
  for (PlannedMode& mode : plan.modes) {
    if (!mode.model.recompute.on()) continue;
    for (size_t j = 0; j < plan.modes.size(); ++j) {
      const config::ModelConfig& other = plan.modes[j].config.model;
      if (!plan.modes[j].model.recompute.on() && other.cuda_graph_impl == mode.config.model.cuda_graph_impl &&
          other.cuda_graph_scope == mode.config.model.cuda_graph_scope) {
        mode.without_recompute = j;
        break;
      }
    }
  }
}

std::string indented(const std::string& text, const std::string& indent) {
  std::string out;
  for (const std::string& line : split(text, '\n')) out += indent + line + "\n";
  return out;
}

// "  planned arena 12.3 MiB (memory plan 2 of 2); activations per microbatch 1.5 MiB with recompute,
// 4.0 MiB without; arena -2.5 MiB (-20.3%) vs local (no recompute)"
std::string mode_memory_line(const BenchPlan& plan, const PlannedMode& mode) {
  const MemoryPlanSummary& own = plan.memory_plans[mode.memory_plan];
  std::string text = strprintf("  planned arena %s (memory plan %zu of %zu); activations per microbatch %s",
                               human_bytes(own.planned_bytes).c_str(), mode.memory_plan + 1, plan.memory_plans.size(),
                               human_bytes(own.activations.with_recompute()).c_str());
  if (mode.model.recompute.on()) {
    text += strprintf(" with recompute %s, %s without", mode.recompute.c_str(),
                      human_bytes(own.activations.without_recompute()).c_str());
  } else {
    text += " (recompute none)";
  }
  if (mode.without_recompute) {
    const PlannedMode& base = plan.modes[*mode.without_recompute];
    const uint64_t base_bytes = plan.memory_plans[base.memory_plan].planned_bytes;
    const int64_t delta = static_cast<int64_t>(own.planned_bytes) - static_cast<int64_t>(base_bytes);
    text += strprintf("; arena %s (%+.1f%%) vs %s (no recompute)", signed_bytes(delta).c_str(),
                      100.0 * static_cast<double>(delta) / static_cast<double>(base_bytes), base.label.c_str());
  }
  return text + "\n";
}

}  // namespace

std::string mode_label(const config::Config& config) {
  const std::string& impl = config.model.cuda_graph_impl;
  const std::vector<std::string>& scope = config.model.cuda_graph_scope;
  const std::vector<std::string> whole_step = {graph::graph_scope_name(graph::GraphScope::full_iteration)};
  if (config::graph_impl_is(config.model, graph::GraphImpl::none)) return impl;
  const bool local = config::graph_impl_is(config.model, graph::GraphImpl::local);
  if (local && (scope.empty() || scope == whole_step)) return impl;
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
  plan.power = options.power;
  plan.trace = !options.trace_path.empty();

  struct Candidate {
    std::string label;  // empty: from the normalized config
    CudaGraphFlags flags;
    std::optional<RecomputeMode> recompute;  // none: the recipe's and the overrides'
  };
  std::vector<Candidate> candidates;
  if (options.compare) {
    for (const GraphMode& mode : parse_mode_list(*options.compare)) {
      candidates.push_back({mode.label(), graph_flags(mode), mode.recompute});
    }
  } else {
    candidates.push_back({"", graph_flags(options), std::nullopt});
  }

  std::string problems;
  for (const Candidate& c : candidates) {
    config::Config raw = bench_config(options, c.flags);
    if (c.recompute) apply_recompute_mode(raw, *c.recompute);
    raw.data_parallel_size = options.num_gpus;  // -ng: one data-parallel rank per GPU
    config::ValidationReport report = config::validate(raw);
    const std::string label = c.label.empty() ? mode_label(report.config) : c.label;
    if (!report.ok()) {
      problems += violations_text(label, report, options);
      continue;
    }
    if (const auto missing = config::unimplemented_features(report.config); !missing.empty()) {
      problems += "mode " + label + ": not implemented yet: " + join(missing, "; ") + "\n";
      continue;
    }
    PlannedMode mode;
    mode.label = label;
    mode.config = std::move(report.config);
    // Rule 15's note compares the warmup with train.train_iters, which the bench does not run: every mode
    // captures after its warmup, whatever train_iters says.
    for (config::Note& note : report.notes) {
      if (note.rule != 15) mode.notes.push_back(std::move(note));
    }
    mode.model = config::model_spec(mode.config);
    mode.recompute = recompute_setting(mode.config);
    plan.modes.push_back(std::move(mode));
  }
  if (!problems.empty()) {
    throw BenchConfigError("stepgraph bench " + plan.recipe + ": nothing was run.\n" + problems);
  }

  for (size_t i = 0; i < plan.modes.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (run_identity(plan.modes[i].config) != run_identity(plan.modes[j].config)) continue;
      const PlannedMode& a = plan.modes[j];
      throw config::ConfigError(strprintf(
          "--compare lists '%s' and '%s', which run the same configuration (cuda_graph_impl %s, scope %s, "
          "recompute %s); list it once",
          a.label.c_str(), plan.modes[i].label.c_str(), a.config.model.cuda_graph_impl.c_str(),
          config::format_value(a.config, "model.cuda_graph_scope").c_str(), a.recompute.c_str()));
    }
  }

  const config::Config& first = plan.modes.front().config;
  const std::string reference = shared_part(first);
  for (const PlannedMode& mode : plan.modes) {
    // Only the CUDA-graph and recompute keys differ between modes (the flags and overrides are shared),
    // so the modes train one model on one batch. A difference here is a bug in the flag mapping.
    SG_CHECK(shared_part(mode.config) == reference,
             "stepgraph bench: mode " + mode.label + " describes a different model or batch than mode " +
                 plan.modes.front().label + "; every compared mode must share them");
  }
  plan.model = plan.modes.front().model;
  plan.batch = config::batch_spec(first);
  plan.optimizer = train::optimizer_spec(first);
  plan.seed = static_cast<uint64_t>(first.rng.seed);
  if (first.model.cuda_graph_warmup_steps > kMaxStepsPerMode) {
    throw config::ConfigError(strprintf("model.cuda_graph_warmup_steps %lld: the bench runs at most %lld warmup "
                                        "steps per mode; set it (or --warmup) lower",
                                        static_cast<long long>(first.model.cuda_graph_warmup_steps),
                                        static_cast<long long>(kMaxStepsPerMode)));
  }
  plan.warmup_steps = static_cast<int>(first.model.cuda_graph_warmup_steps);
  assign_memory_plans(plan);
  if (options.bridge.max_steps) {
    // Bridge's max_steps counts every optimizer step of the run: here warmup + capture + measured + floor.
    const int64_t measured = *options.bridge.max_steps - plan.warmup_steps - 1 - plan.floor_steps;
    if (measured < 1) {
      throw config::ConfigError(strprintf(
          "-ms/--max_steps %lld leaves no measured step: each mode runs %d warmup + 1 capture + %d floor steps "
          "before measuring; give at least %lld",
          static_cast<long long>(*options.bridge.max_steps), plan.warmup_steps, plan.floor_steps,
          static_cast<long long>(plan.warmup_steps) + 2 + plan.floor_steps));
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
      "(%lld steps)\n",
      plan.warmup_steps, plan.warmup_steps == 1 ? "" : "s", plan.steps, plan.steps == 1 ? "" : "s", plan.floor_steps,
      plan.floor_steps == 1 ? "" : "s", plan.trace ? " (the first one traced)" : "",
      static_cast<long long>(plan.steps_per_mode()));
  if (!plan.options.bridge.ignored.empty()) {
    text += "ignored (Megatron-Bridge launcher flags; they do not change what runs here): " +
            join(plan.options.bridge.ignored, " ") + "\n";
  }
  if (plan.memory_plans.size() == 1) {
    text += train::describe_gpu_memory_plan(plan.modes.front().config) + " (shared by every mode)\n";
  } else {
    text += strprintf("%zu memory plans (recompute changes the activations): each is allocated for its modes "
                      "and freed before the next one, so every mode's peak memory is its own\n",
                      plan.memory_plans.size());
    for (size_t p = 0; p < plan.memory_plans.size(); ++p) {
      std::vector<std::string> labels;
      for (size_t i : plan.memory_plans[p].modes) labels.push_back(plan.modes[i].label);
      text += strprintf("memory plan %zu (%s):\n", p + 1, join(labels, ", ").c_str());
      text += indented(train::describe_gpu_memory_plan(plan.modes[plan.memory_plans[p].modes.front()].config), "  ");
    }
  }
  for (const PlannedMode& mode : plan.modes) {
    text += "mode " + mode.label + ":\n";
    for (const char* key : kGraphKeys) text += strprintf("  %s = %s\n", key, config::format_value(mode.config, key).c_str());
    for (const char* key : kRecomputeKeys) {
      text += strprintf("  %s = %s\n", key, config::format_value(mode.config, key).c_str());
    }
    text += "  " + train::describe_graph_plan(mode.config) + "\n";
    text += indented(train::describe_activation_plan(mode.config), "  ");
    text += mode_memory_line(plan, mode);
    for (const config::Note& note : mode.notes) text += "  " + config::format_note(note);
  }
  return text;
}

}  // namespace sg::bench
