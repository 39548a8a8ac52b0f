#include "bench/bench_html.h"

#include <algorithm>
#include <cmath>

#include "core/strings.h"
#include "train/metrics.h"
#include "train/run_plan.h"
#include "train/svg_chart.h"

namespace sg::bench {
namespace {

using train::ChartBar;

// One bar per mode of `value(i)`; modes without the value are left out.
template <class F>
std::vector<ChartBar> bars(const BenchResults& results, F&& value, const char* format) {
  std::vector<ChartBar> out;
  for (size_t i = 0; i < results.modes.size(); ++i) {
    const double v = value(i);
    if (!std::isfinite(v)) continue;
    out.push_back({results.modes[i].label, v, strprintf(format, v)});
  }
  return out;
}

// "model: dense Llama, ..." -> "dense Llama, ...".
std::string without_label(const std::string& line) {
  const size_t colon = line.find(": ");
  return colon == std::string::npos ? line : line.substr(colon + 2);
}

// Every rank's tokens, as the stdout table's and the JSON's tokens per step (num_microbatches is one rank's).
std::string thousands_tokens(const BenchPlan& plan) {
  const int64_t tokens = plan.batch.global_microbatches() * plan.batch.tokens_per_microbatch(plan.model);
  const int64_t ranks = plan.batch.data_parallel_size;
  return train::thousands(tokens) +
         strprintf(" (%s%lld microbatch%s of %lld sequences x %lld tokens)",
                   ranks > 1 ? strprintf("%lld ranks x ", static_cast<long long>(ranks)).c_str() : "",
                   static_cast<long long>(plan.batch.num_microbatches), plan.batch.num_microbatches == 1 ? "" : "es",
                   static_cast<long long>(plan.batch.micro_batch_size), static_cast<long long>(plan.model.seq_length));
}

}  // namespace

std::string report_html(const BenchPlan& plan, const BenchResults& results, const BenchReport& report) {
  const BenchEnvironment& env = results.env;
  const auto& s = report.modes;
  std::string body = "<h1>stepgraph bench " + train::html_escape(plan.recipe) + "</h1>\n<p class=\"sub\">" +
                     train::html_escape(env.device_summary) + "</p>\n";
  body += train::html_table({
      {"model", without_label(train::describe_model(plan.modes.front().config))},
      {"tokens per step", thousands_tokens(plan)},
      {"schedule per mode", strprintf("%d eager warmup, 1 capture, %d measured (CUDA events), %d floor (CUPTI)",
                                      plan.warmup_steps, plan.steps, plan.floor_steps)},
      {"arena", describe_arenas(results)},
      {"peak", env.peak_tflops > 0 ? strprintf("%.0f TFLOP/s dense bf16", env.peak_tflops) : std::string("unknown")},
      {"losses agree", report.losses_agree ? "yes, bit for bit" : "NO (see the notes)"},
  });

  body += "<h2>Per mode</h2>\n<div class=\"grid2\">";
  body += train::render_bar_chart("median step time", "ms",
                                  bars(results, [&](size_t i) { return s[i].step_ms.median; }, "%.3f ms"));
  body += train::render_bar_chart("tokens per second", "",
                                  bars(results, [&](size_t i) { return s[i].tokens_per_s; }, "%.0f tok/s"));
  body += train::render_bar_chart("host launch time per step (median)", "ms",
                                  bars(results, [&](size_t i) { return s[i].host_ms.median; }, "%.3f ms"));
  body += train::render_bar_chart(
      "kernel-time floor (CUPTI)", "ms",
      bars(results, [&](size_t i) { return s[i].floor_ms.value_or(NAN); }, "%.3f ms"));
  body += train::render_bar_chart(
      "capture + instantiate", "ms",
      bars(results, [&](size_t i) { return s[i].capture_total_ms.value_or(NAN); }, "%.1f ms"));
  body += train::render_bar_chart(
      "peak device memory", "MiB",
      bars(results, [&](size_t i) { return static_cast<double>(results.modes[i].memory_peak) / (1 << 20); },
           "%.1f MiB"));
  if (any_power_measured(results)) {  // the clock tells a power-capped step from a slow one (power_summary.h)
    body += train::render_bar_chart("SM clock during the measured steps (median, NVML)", "MHz",
                                    bars(results,
                                         [&](size_t i) {
                                           const PowerSummary& p = results.modes[i].power;
                                           return p.measured() ? p.sm_clock_median_mhz : NAN;
                                         },
                                         "%.0f MHz"));
  }
  body += "</div>\n";

  // Histograms on one x axis so the modes compare at a glance.
  double lo = INFINITY, hi = -INFINITY;
  for (const ModeResult& m : results.modes) {
    for (const double v : m.step_ms) {
      if (!std::isfinite(v)) continue;
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
  }
  body += "<h2>Step time distributions</h2>\n<div class=\"grid2\">";
  for (const ModeResult& m : results.modes) {
    body += train::render_histogram(m.label + strprintf(" (%zu steps)", m.step_ms.size()), "step ms (CUDA events)",
                                    m.step_ms, 40, std::isfinite(lo) ? lo : 0.0, std::isfinite(hi) ? hi : 0.0);
  }
  body += "</div>\n";
  body += "<h2>Table</h2>\n<pre>" + train::html_escape(format_report(plan, results, report)) + "</pre>\n";
  return train::html_page("stepgraph bench " + plan.recipe, body);
}

}  // namespace sg::bench
