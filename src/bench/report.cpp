#include "bench/report.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>

#include "core/strings.h"
#include "graph/scope_plan.h"
#include "kernels/lm_head.h"
#include "model/recompute_spec.h"
#include "model/stack.h"
#include "train/metrics.h"
#include "train/run_plan.h"

namespace sg::bench {
namespace {

// Every rank's tokens (the global batch): tokens/s is the run's; TFLOP/s and MFU stay per GPU.
double tokens_per_step(const BenchPlan& plan) {
  return static_cast<double>(plan.batch.global_microbatches() * plan.batch.tokens_per_microbatch(plan.model));
}

// Whether a mode ran without recompute: recompute_setting's "none".
bool no_recompute(const ModeResult& m) {
  return m.recompute == model::recompute_granularity_name(model::RecomputeGranularity::none);
}

// The first impl-none mode without recompute: the eager reference for the memory overhead.
const ModeResult* eager_reference(const BenchResults& results) {
  for (const ModeResult& m : results.modes) {
    if (m.impl == graph::graph_impl_name(graph::GraphImpl::none) && no_recompute(m)) return &m;
  }
  return nullptr;
}

// The listed mode with the same CUDA-graph keys that recomputes nothing, for a mode that recomputes.
const ModeResult* without_recompute(const BenchResults& results, const ModeResult& mode) {
  if (no_recompute(mode)) return nullptr;
  for (const ModeResult& m : results.modes) {
    if (no_recompute(m) && m.impl == mode.impl && m.scope == mode.scope) return &m;
  }
  return nullptr;
}

bool any_recompute(const BenchResults& results) {
  for (const ModeResult& m : results.modes) {
    if (!no_recompute(m)) return true;
  }
  return false;
}

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof(double)) == 0; }

std::string fixed(double value, int decimals) {
  if (!std::isfinite(value)) return "-";
  return strprintf("%.*f", decimals, value);
}

template <class T>
nlohmann::json optional_json(const std::optional<T>& value) {
  return value ? nlohmann::json(*value) : nlohmann::json(nullptr);
}

nlohmann::json stats_json(const SampleStats& s, const std::vector<double>& samples) {
  return {{"median", s.median}, {"p90", s.p90},   {"mean", s.mean},
          {"min", s.min},       {"max", s.max},   {"count", s.count},
          {"samples", samples}};
}

std::string render_table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> widths;
  for (const auto& row : rows) {
    widths.resize(std::max(widths.size(), row.size()), 0);
    for (size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], row[i].size());
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      const std::string pad(widths[i] - row[i].size(), ' ');
      if (i == 0) {
        line += row[i] + pad;  // the mode: left-aligned
      } else {
        line += "  " + pad + row[i];
      }
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

}  // namespace

bool any_power_measured(const BenchResults& results) {
  for (const ModeResult& m : results.modes) {
    if (m.power.measured()) return true;
  }
  return false;
}

std::string describe_arenas(const BenchResults& results) {
  std::vector<size_t> plans;  // memory plans in order of first use
  for (const ModeResult& m : results.modes) {
    if (std::find(plans.begin(), plans.end(), m.memory_plan) == plans.end()) plans.push_back(m.memory_plan);
  }
  if (plans.size() <= 1) {
    const uint64_t bytes = results.modes.empty() || results.modes.front().arena_bytes == 0
                               ? results.env.arena_bytes
                               : results.modes.front().arena_bytes;
    return human_bytes(bytes) + " (one allocation, shared by every mode)";
  }
  std::vector<std::string> parts;
  for (size_t plan : plans) {
    std::vector<std::string> labels;
    uint64_t bytes = 0;
    for (const ModeResult& m : results.modes) {
      if (m.memory_plan != plan) continue;
      labels.push_back(m.label);
      bytes = std::max(bytes, m.arena_bytes);
    }
    parts.push_back(human_bytes(bytes) + " (" + join(labels, ", ") + ")");
  }
  return join(parts, ", ") + ": one per memory plan, each freed before the next";
}

std::string signed_bytes(int64_t bytes) {
  if (bytes == 0) return "0 B";
  const uint64_t magnitude = bytes < 0 ? static_cast<uint64_t>(-(bytes + 1)) + 1 : static_cast<uint64_t>(bytes);
  return (bytes < 0 ? "-" : "+") + human_bytes(magnitude);
}

BenchReport summarize(const BenchPlan& plan, const BenchResults& results) {
  BenchReport report;
  const double tokens = tokens_per_step(plan);
  const double flops = train::training_flops_per_step(plan.model, plan.batch);
  const double peak = results.env.peak_tflops;
  const ModeResult* eager = eager_reference(results);

  for (const ModeResult& m : results.modes) {
    ModeSummary s;
    s.step_ms = sample_stats(m.step_ms);
    s.host_ms = sample_stats(m.host_ms);
    if (!m.step_ms.empty() && std::isfinite(m.window_ms)) {
      s.mean_step_ms = m.window_ms / static_cast<double>(m.step_ms.size());
    }
    const double seconds = s.step_ms.median / 1e3;
    if (std::isfinite(seconds) && seconds > 0) {
      s.tokens_per_s = tokens / seconds;
      s.tflops = flops / seconds / 1e12;
      s.mfu = peak > 0 ? s.tflops / peak : 0.0;
    }
    if (m.floor_steps > 0) {
      if (m.dropped_records > 0) {
        report.notes.push_back(strprintf("%s: CUPTI dropped %llu activity records, so its floor is incomplete and "
                                         "not shown",
                                         m.label.c_str(), static_cast<unsigned long long>(m.dropped_records)));
      } else if (m.floor.records() == 0) {
        report.notes.push_back(m.label + ": CUPTI delivered no kernel records, so there is no floor (is another "
                                         "profiler attached?)");
      } else {
        s.floor_mean_ms = static_cast<double>(m.floor.busy_ns) / 1e6 / m.floor_steps;
        s.floor_ms = floor_median_ms(m);
        s.floor_sum_ms = static_cast<double>(m.floor.duration_sum_ns()) / 1e6 / m.floor_steps;
        if (std::isfinite(s.step_ms.median) && s.floor_ms && *s.floor_ms > 0) {
          s.efficiency = s.step_ms.median / *s.floor_ms;
        }
      }
      if (m.floor.invalid > 0) {
        report.notes.push_back(strprintf("%s: %llu CUPTI records had no valid timestamps and were left out",
                                         m.label.c_str(), static_cast<unsigned long long>(m.floor.invalid)));
      }
      if (s.efficiency && *s.efficiency < 0.99) {
        report.notes.push_back(strprintf("%s: the median step (%.3f ms) is below the floor (%.3f ms): the GPU ran "
                                         "faster in the timed steps than in the traced ones (clocks?)",
                                         m.label.c_str(), s.step_ms.median, *s.floor_ms));
      }
    }
    if (m.captured) {
      s.capture_total_ms = m.capture_ms + m.instantiate_ms;
      s.graph_memory_bytes = static_cast<int64_t>(m.memory_after_capture) - static_cast<int64_t>(m.memory_before_capture);
    }
    if (eager != nullptr && eager->memory_peak > 0) {
      s.overhead_vs_eager_bytes = static_cast<int64_t>(m.memory_peak) - static_cast<int64_t>(eager->memory_peak);
      s.overhead_vs_eager_percent =
          100.0 * static_cast<double>(*s.overhead_vs_eager_bytes) / static_cast<double>(eager->memory_peak);
    }
    if (const ModeResult* base = without_recompute(results, m)) {
      s.without_recompute = base->label;
      const double base_ms = sample_stats(base->step_ms).median;
      if (std::isfinite(base_ms) && base_ms > 0 && std::isfinite(s.step_ms.median)) {
        s.step_vs_without_recompute_percent = 100.0 * (s.step_ms.median - base_ms) / base_ms;
      }
      if (base->memory_peak > 0) {
        s.peak_vs_without_recompute_bytes = static_cast<int64_t>(m.memory_peak) - static_cast<int64_t>(base->memory_peak);
        s.peak_vs_without_recompute_percent =
            100.0 * static_cast<double>(*s.peak_vs_without_recompute_bytes) / static_cast<double>(base->memory_peak);
      }
    } else if (!no_recompute(m)) {
      report.notes.push_back(m.label + ": no 'vs no recompute' figures: add the same graph mode without recompute (" +
                             (m.scope.empty() || m.impl == graph::graph_impl_name(graph::GraphImpl::local)
                                  ? m.impl
                                  : m.impl + ":" + join(m.scope, "+")) +
                             ") to --compare");
    }
    report.modes.push_back(s);
  }

  if (plan.floor_steps == 0) report.notes.push_back("no kernel-time floor: --floor-steps 0");
  for (const ModeResult& m : results.modes) {
    if (!m.power.measured() && !m.power.unavailable.empty()) {
      report.notes.push_back("no power and SM clock samples: " + m.power.unavailable);
      break;  // one reason serves: every mode samples through the same NVML
    }
  }
  if (plan.floor_steps > 0 && !results.env.cupti_error.empty()) {
    report.notes.push_back("no kernel-time floor (and no --trace): " + results.env.cupti_error);
  }
  if (eager == nullptr && !results.modes.empty()) {
    report.notes.push_back("no 'vs eager' memory column: add none to --compare (without recompute) to measure against "
                           "eager");
  }
  for (const ModeResult& m : results.modes) {
    if (!same_bits(m.final_loss, results.modes.front().final_loss)) report.losses_agree = false;
  }
  if (!report.losses_agree) {
    std::vector<std::string> losses;
    for (const ModeResult& m : results.modes) losses.push_back(strprintf("%s %.9g", m.label.c_str(), m.final_loss));
    report.notes.push_back("the modes ended at different losses after the same " +
                           std::to_string(plan.steps_per_mode()) + " steps (" + join(losses, ", ") +
                           "); graphs and activation recompute are meant to be bitwise equal to eager without "
                           "recompute");
  }
  return report;
}

std::optional<double> floor_median_ms(const ModeResult& m) {
  if (m.floor_steps <= 0 || m.floor.records() == 0) return std::nullopt;
  // The median: one traced step that ran slow (a clock dip, CUPTI's own work) must not move the floor.
  if (m.floor_step_ms.size() == static_cast<size_t>(m.floor_steps)) return sample_stats(m.floor_step_ms).median;
  return static_cast<double>(m.floor.busy_ns) / 1e6 / m.floor_steps;
}

std::string format_report(const BenchPlan& plan, const BenchResults& results, const BenchReport& report) {
  const model::ModelSpec& model = plan.model;
  const BenchEnvironment& env = results.env;
  const double flops = train::training_flops_per_step(plan.model, plan.batch);
  std::string out = strprintf(
      "stepgraph bench %s on %s\n"
      "  model: %s, hidden %lld, ffn %lld, %lld heads, seq %lld, vocab %lld; %.0f tokens per step (every rank's), "
      "%.3g TFLOP per step per GPU\n"
      "  peak %s; arena %s\n"
      "  per mode: %d eager warmup, 1 capture, %d measured (CUDA events) with %d floor step%s (CUPTI) among them\n",
      plan.recipe.c_str(), env.device_summary.c_str(), model::describe_stack(model).c_str(),
      static_cast<long long>(model.hidden_size), static_cast<long long>(model.ffn_hidden_size),
      static_cast<long long>(model.num_attention_heads), static_cast<long long>(model.seq_length),
      static_cast<long long>(model.vocab_size), tokens_per_step(plan), flops / 1e12,
      env.peak_tflops > 0 ? strprintf("%.0f TFLOP/s dense bf16", env.peak_tflops).c_str()
                          : "unknown for this device (MFU shown as -)",
      describe_arenas(results).c_str(), plan.warmup_steps, plan.steps, plan.floor_steps,
      plan.floor_steps == 1 ? "" : "s");
  // Said in every report, so a figure with bf16 moments is not read as the fp32-moment step.
  if (!plan.modes.empty()) out += "  " + train::describe_optimizer(plan.modes.front().config) + "\n";
  out += "\n";

  const bool recompute = any_recompute(results);
  std::vector<std::string> header = {"mode", "step ms", "p90 ms", "tokens/s", "TFLOP/s", "MFU", "host ms",
                                     "floor ms", "step/floor", "capture ms", "graphs", "layers",
                                     "peak mem", "vs eager"};
  if (recompute) {
    header.insert(header.begin() + 1, "recompute");
    header.insert(header.end(), {"step vs no recompute", "peak vs no recompute"});
  }
  std::vector<std::vector<std::string>> rows = {header};
  for (size_t i = 0; i < results.modes.size() && i < report.modes.size(); ++i) {
    const ModeResult& m = results.modes[i];
    const ModeSummary& s = report.modes[i];
    std::string vs_eager = "-";
    if (&m == eager_reference(results) && s.overhead_vs_eager_bytes) {
      vs_eager = "(reference)";
    } else if (s.overhead_vs_eager_bytes) {
      vs_eager = strprintf("%s (%+.3f%%)", signed_bytes(*s.overhead_vs_eager_bytes).c_str(),
                           *s.overhead_vs_eager_percent);
    }
    std::vector<std::string> row = {m.label,
                                    fixed(s.step_ms.median, 3),
                                    fixed(s.step_ms.p90, 3),
                                    fixed(s.tokens_per_s, 0),
                                    fixed(s.tflops, 1),
                                    env.peak_tflops > 0 ? fixed(100.0 * s.mfu, 1) + "%" : "-",
                                    fixed(s.host_ms.median, 3),
                                    s.floor_ms ? fixed(*s.floor_ms, 3) : "-",
                                    s.efficiency ? fixed(*s.efficiency, 3) + "x" : "-",
                                    s.capture_total_ms ? fixed(*s.capture_total_ms, 1) : "-",
                                    std::to_string(m.graphs_created),
                                    strprintf("%d/%d", m.graphable_layers, m.total_layers),
                                    human_bytes(m.memory_peak),
                                    vs_eager};
    if (recompute) {
      row.insert(row.begin() + 1, m.recompute);
      row.push_back(s.step_vs_without_recompute_percent ? strprintf("%+.1f%%", *s.step_vs_without_recompute_percent)
                                                        : "-");
      row.push_back(s.peak_vs_without_recompute_bytes
                        ? strprintf("%s (%+.1f%%)", signed_bytes(*s.peak_vs_without_recompute_bytes).c_str(),
                                    *s.peak_vs_without_recompute_percent)
                        : "-");
    }
    rows.push_back(std::move(row));
  }
  out += render_table(rows);
  // Power and clock, one line a mode: context for the step times (power_summary.h says why).
  if (any_power_measured(results)) {
    out += "\npower and SM clock during the measured steps (NVML):\n";
    for (const ModeResult& m : results.modes) out += "  " + m.label + ": " + describe_power(m.power) + "\n";
  }
  if (!report.notes.empty()) {
    out += "\n";
    for (const std::string& note : report.notes) out += "note: " + note + "\n";
  }
  return out;
}

std::string report_json(const BenchPlan& plan, const BenchResults& results, const BenchReport& report) {
  const BenchOptions& o = plan.options;
  const model::ModelSpec& m = plan.model;
  const BenchEnvironment& env = results.env;
  nlohmann::json j;
  j["recipe"] = plan.recipe;
  j["flags"] = {{"model_family_name", o.model_family},
                {"model_recipe_name", o.model_recipe},
                {"task", o.task},
                {"gpu", o.gpu},
                {"compute_dtype", o.compute_dtype},
                {"num_gpus", o.num_gpus},
                {"cuda_graph_impl", optional_json(o.cuda_graph_impl)},
                {"cuda_graph_scope", optional_json(o.cuda_graph_scope)},
                {"compare", optional_json(o.compare)},
                {"overrides", o.overrides}};
  j["model"] = {{"num_layers", m.num_layers},
                {"layer_pattern", model::layer_pattern_string(model::stack_layer_kinds(m))},
                {"hidden_size", m.hidden_size},
                {"ffn_hidden_size", m.ffn_hidden_size},
                {"num_attention_heads", m.num_attention_heads},
                {"num_query_groups", m.num_query_groups},
                {"seq_length", m.seq_length},
                {"vocab_size", m.vocab_size}};
  {
    const size_t budget = kernels::lm_head_chunk_budget_bytes();  // the step's (STEPGRAPH_LM_HEAD_CHUNK_MIB)
    const kernels::LmHeadLayout head =
        kernels::lm_head_layout({plan.batch.tokens_per_microbatch(m), m.hidden_size, m.vocab_size}, budget);
    j["lm_head"] = {{"chunk_budget_bytes", budget}, {"chunk_rows", head.chunk_rows}, {"chunks", head.num_chunks}};
  }
  if (!plan.modes.empty()) {
    const config::Config& first = plan.modes.front().config;
    j["optimizer"] = {{"exp_avg_dtype", first.optimizer.exp_avg_dtype},
                      {"exp_avg_sq_dtype", first.optimizer.exp_avg_sq_dtype},
                      {"main_grad_dtype", first.ddp.grad_reduce_in_fp32 ? "fp32" : "bf16"}};
  }
  j["batch"] = {{"micro_batch_size", plan.batch.micro_batch_size},
                {"num_microbatches", plan.batch.num_microbatches},
                {"data_parallel_size", plan.batch.data_parallel_size},
                {"tokens_per_step", tokens_per_step(plan)},
                {"flops_per_step", train::training_flops_per_step(plan.model, plan.batch)},
                {"matmul_flops_per_step", train::training_flops_by_kind(plan.model, plan.batch).matmul}};
  j["schedule"] = {{"warmup_steps", plan.warmup_steps},
                   {"capture_steps", 1},
                   {"measured_steps", plan.steps},
                   {"floor_steps", plan.floor_steps},
                   {"steps_per_mode", plan.steps_per_mode()}};
  j["device"] = {{"name", env.device_name},
                 {"summary", env.device_summary},
                 {"total_memory_bytes", env.device_total_memory},
                 {"peak_bf16_tflops", env.peak_tflops},
                 {"driver_version", env.driver_version},
                 {"runtime_version", env.runtime_version},
                 {"cupti_version", env.cupti_version},
                 {"cupti_error", env.cupti_error}};
  j["arena_bytes"] = env.arena_bytes;  // the largest arena; each mode's is in modes[i].memory.arena_bytes
  j["memory_plans"] = nlohmann::json::array();
  for (const MemoryPlanSummary& p : plan.memory_plans) {
    std::vector<std::string> labels;
    for (size_t i : p.modes) labels.push_back(plan.modes[i].label);
    j["memory_plans"].push_back({{"modes", labels},
                                 {"recompute", plan.modes[p.modes.front()].recompute},
                                 {"planned_bytes", p.planned_bytes},
                                 {"activation_bytes", p.activations.with_recompute()},
                                 {"activation_bytes_without_recompute", p.activations.without_recompute()},
                                 {"recompute_buffer_bytes", p.activations.recompute_buffer_bytes}});
  }
  j["losses_agree"] = report.losses_agree;
  j["notes"] = report.notes;
  j["modes"] = nlohmann::json::array();
  for (size_t i = 0; i < results.modes.size() && i < report.modes.size(); ++i) {
    const ModeResult& r = results.modes[i];
    const ModeSummary& s = report.modes[i];
    nlohmann::json mode;
    mode["label"] = r.label;
    mode["cuda_graph_impl"] = r.impl;
    mode["cuda_graph_scope"] = r.scope;
    mode["description"] = r.description;
    mode["step_ms"] = stats_json(s.step_ms, r.step_ms);
    mode["mean_step_ms"] = s.mean_step_ms;
    mode["tokens_per_s"] = s.tokens_per_s;
    mode["tflops_per_gpu"] = s.tflops;
    mode["mfu"] = s.mfu;
    mode["host_launch_ms"] = stats_json(s.host_ms, r.host_ms);
    mode["floor"] = {{"steps", r.floor_steps},
                     {"ms_per_step", optional_json(s.floor_ms)},
                     {"mean_ms_per_step", optional_json(s.floor_mean_ms)},
                     {"per_step_ms", r.floor_step_ms},
                     {"duration_sum_ms_per_step", optional_json(s.floor_sum_ms)},
                     {"kernel_ms_per_step", r.floor_steps > 0 ? static_cast<double>(r.floor.kernel_ns) / 1e6 / r.floor_steps
                                                              : kNotMeasured},
                     {"memset_ms_per_step", r.floor_steps > 0 ? static_cast<double>(r.floor.memset_ns) / 1e6 / r.floor_steps
                                                              : kNotMeasured},
                     {"memcpy_ms_per_step", r.floor_steps > 0 ? static_cast<double>(r.floor.memcpy_ns) / 1e6 / r.floor_steps
                                                              : kNotMeasured},
                     {"kernels", r.floor.kernels},
                     {"memsets", r.floor.memsets},
                     {"memcpys", r.floor.memcpys},
                     {"invalid_records", r.floor.invalid},
                     {"dropped_records", r.dropped_records}};
    mode["efficiency"] = optional_json(s.efficiency);
    mode["capture"] = {{"captured", r.captured},
                       {"capture_ms", r.captured ? r.capture_ms : kNotMeasured},
                       {"instantiate_ms", r.captured ? r.instantiate_ms : kNotMeasured},
                       {"total_ms", optional_json(s.capture_total_ms)},
                       {"step_ms", r.capture_step_ms},
                       {"step_host_ms", r.capture_step_host_ms}};
    mode["graphs"] = {{"created", r.graphs_created},
                      {"live", r.graphs_live},
                      {"graphable_regions", r.graphable_regions},
                      {"graphable_layers", r.graphable_layers},
                      {"total_layers", r.total_layers},
                      {"nodes", r.graph_nodes},
                      {"kernel_nodes", r.graph_kernel_nodes},
                      {"memset_nodes_lowered", r.graph_memset_nodes_lowered},
                      {"memset_nodes_hoisted", r.graph_memset_nodes_hoisted},
                      {"replays", r.replays}};
    mode["memory"] = {{"before_capture_bytes", r.memory_before_capture},
                      {"after_capture_bytes", r.memory_after_capture},
                      {"graph_bytes", optional_json(s.graph_memory_bytes)},
                      {"peak_bytes", r.memory_peak},
                      {"arena_bytes", r.arena_bytes != 0 ? r.arena_bytes : env.arena_bytes},
                      {"memory_plan", r.memory_plan},
                      {"overhead_vs_eager_bytes", optional_json(s.overhead_vs_eager_bytes)},
                      {"overhead_vs_eager_percent", optional_json(s.overhead_vs_eager_percent)}};
    mode["recompute"] = {{"setting", r.recompute},
                         {"activation_bytes", r.activation_bytes},
                         {"activation_bytes_without_recompute", r.activation_bytes_without_recompute},
                         {"without_recompute_mode", optional_json(s.without_recompute)},
                         {"step_vs_without_recompute_percent", optional_json(s.step_vs_without_recompute_percent)},
                         {"peak_vs_without_recompute_bytes", optional_json(s.peak_vs_without_recompute_bytes)},
                         {"peak_vs_without_recompute_percent", optional_json(s.peak_vs_without_recompute_percent)}};
    const PowerSummary& p = r.power;
    mode["power"] = {{"samples", p.samples},
                     {"unavailable", p.measured() ? nlohmann::json(nullptr) : nlohmann::json(p.unavailable)},
                     {"interval_ms", p.interval_ms},
                     {"instant", p.power_instant},
                     {"limit_w", p.power_limit_w},
                     {"median_w", p.power_median_w},
                     {"max_w", p.power_max_w},
                     {"sm_clock_median_mhz", p.sm_clock_median_mhz},
                     {"sm_clock_min_mhz", p.sm_clock_min_mhz},
                     {"sm_clock_device_max_mhz", p.max_sm_clock_mhz},
                     {"reasons_known", p.reasons_known},
                     {"power_capped_share", p.power_capped_share},
                     {"thermal_share", p.thermal_share}};
    mode["final_loss"] = r.final_loss;
    mode["optimizer_steps"] = r.optimizer_steps;
    j["modes"].push_back(std::move(mode));
  }
  // A recipe path or an override value that is not UTF-8 is written with U+FFFD rather than losing the file.
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace sg::bench
