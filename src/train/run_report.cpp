#include "train/run_report.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "checkpoint/durable_io.h"
#include "core/strings.h"
#include "train/svg_chart.h"

namespace sg::train {
namespace {

struct Curves {
  std::vector<double> step, loss, lr, grad_norm, tokens_per_s, step_ms, memory_mib;
  std::vector<double> eval_step, val_loss, val_ppl, eval_ms, eval_batches;
  std::vector<ChartMarker> captures;
};

double number(const nlohmann::json& j, const char* key) {
  const auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : NAN;
}

Curves read_metrics(const std::string& path) {
  Curves c;
  // Only a file holds records: a device (/dev/full in the full-disk tests) would read without end.
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return c;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(line);
    } catch (const nlohmann::json::exception&) {
      continue;  // a torn last line of a killed run
    }
    if (!j.is_object() || !j.contains("step")) continue;
    const double step = number(j, "step");
    if (j.contains("val_loss")) {
      c.eval_step.push_back(step);
      c.val_loss.push_back(number(j, "val_loss"));
      c.val_ppl.push_back(number(j, "val_ppl"));
      c.eval_ms.push_back(number(j, "eval_ms"));
      c.eval_batches.push_back(number(j, "eval_batches"));
      continue;
    }
    c.step.push_back(step);
    c.loss.push_back(number(j, "loss"));
    c.lr.push_back(number(j, "lr"));
    c.grad_norm.push_back(number(j, "grad_norm"));
    const bool capture = j.value("capture", false);
    // The capture step's time includes the capture: kept out of the throughput curves, marked instead.
    c.tokens_per_s.push_back(capture ? NAN : number(j, "tokens_per_s"));
    c.step_ms.push_back(capture ? NAN : number(j, "step_ms"));
    c.memory_mib.push_back(number(j, "device_memory_used") / (1024.0 * 1024.0));
    if (capture) c.captures.push_back({step, "graph capture"});
  }
  return c;
}

LineChart chart(const std::string& title, const std::string& y_label, const Curves& c,
                std::vector<ChartSeries> series, bool log_y = false) {
  LineChart ch;
  ch.title = title;
  ch.x_label = "step";
  ch.y_label = y_label;
  ch.series = std::move(series);
  ch.markers = c.captures;
  ch.log_y = log_y;
  return ch;
}

std::string eval_table(const Curves& c) {
  if (c.eval_step.empty()) return "<p>No evaluation (train.eval_interval is null).</p>\n";
  std::string out = "<table class=\"num\"><tr><th>step</th><th>val loss</th><th>val ppl</th><th>batches</th>"
                    "<th>ms</th></tr>";
  for (size_t i = 0; i < c.eval_step.size(); ++i) {
    out += strprintf("<tr><td>%.0f</td><td>%.4f</td><td>%.3f</td><td>%.0f</td><td>%.1f</td></tr>", c.eval_step[i],
                     c.val_loss[i], c.val_ppl[i], c.eval_batches[i], c.eval_ms[i]);
  }
  return out + "</table>\n";
}

}  // namespace

void write_run_report(const std::string& metrics_path, const std::string& html_path, const RunReportInfo& info) {
  const Curves c = read_metrics(metrics_path);
  std::string body = "<h1>" + html_escape(info.title) + "</h1>\n<p class=\"sub\">" + html_escape(info.status) +
                     "</p>\n";
  std::vector<std::pair<std::string, std::string>> facts = info.facts;
  if (!c.step.empty()) {
    facts.emplace_back("steps in metrics.jsonl", strprintf("%.0f to %.0f", c.step.front(), c.step.back()));
    facts.emplace_back("last loss", strprintf("%.4f", c.loss.back()));
  }
  if (!c.val_loss.empty()) {
    facts.emplace_back("last val loss", strprintf("%.4f (ppl %.3f) at step %.0f", c.val_loss.back(), c.val_ppl.back(),
                                                  c.eval_step.back()));
  }
  body += html_table(facts);

  body += "<h2>Loss</h2>\n<div class=\"grid2\">";
  ChartSeries train{"train loss", c.step, c.loss};
  ChartSeries val{"validation loss", c.eval_step, c.val_loss};
  val.markers = true;
  body += render_line_chart(chart("loss", "loss (nats)", c, {train, val}), 980, 320);
  body += "</div>\n<h2>Optimizer</h2>\n<div class=\"grid2\">";
  body += render_line_chart(chart("learning rate", "lr", c, {{"lr", c.step, c.lr}}));
  body += render_line_chart(chart("gradient norm (before clipping)", "norm", c, {{"grad norm", c.step, c.grad_norm}},
                                  /*log_y=*/true));
  body += "</div>\n<h2>Throughput and memory</h2>\n<div class=\"grid2\">";
  body += render_line_chart(chart("throughput", "tokens/s", c, {{"tokens/s", c.step, c.tokens_per_s}}));
  body += render_line_chart(chart("step time", "ms", c, {{"step ms", c.step, c.step_ms}}));
  body += render_line_chart(chart(info.gpu ? "device memory in use" : "process resident memory (CPU backend)",
                                  "MiB", c, {{"MiB", c.step, c.memory_mib}}));
  body += "</div>\n<h2>Evaluations</h2>\n" + eval_table(c);
  if (!info.plan.empty()) {
    body += "<h2>Plan</h2>\n<pre>" + html_escape(join(info.plan, "\n")) + "</pre>\n";
  }
  if (!info.config_yaml.empty()) {
    body += "<h2>Configuration</h2>\n<details><summary>config.yaml</summary><pre>" + html_escape(info.config_yaml) +
            "</pre></details>\n";
  }
  checkpoint::write_file_atomically(html_path, html_page(info.title, body));
}

}  // namespace sg::train
