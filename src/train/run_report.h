#pragma once
// runs/<name>/report.html: the run as one self-contained page (inline SVG, no script, no network):
// loss and validation loss, learning rate, gradient norm, throughput, step time and memory over the
// steps, the CUDA-graph capture step marked, the evaluations as a table, and the run's header (model,
// batch, memory and graph plans, status). Built from runs/<name>/metrics.jsonl, so a resumed run's
// report shows the whole run. The records are reduced while they are read (a line a step: a 10M-step run's
// metrics.jsonl is ~2.7 GB): the charts keep their series' envelopes (SeriesEnvelope, train/svg_chart.h: the same
// SVG as from every record), the page's numbers (first and last step, last loss, last evaluation) are kept as
// they are, and past 1000 evaluations the table lists one in a power of two and the last, saying so; so writing
// the report takes a few MB of host memory whatever the run's length.
#include <string>
#include <vector>

namespace sg::train {

struct RunReportInfo {
  std::string title;                // "stepgraph run: demo"
  std::string status;               // "finished: 300 steps", "stopped by SIGINT after step 120", ...
  std::vector<std::pair<std::string, std::string>> facts;  // shown as a table (device, tokens per step, ...)
  std::vector<std::string> plan;    // the start-up lines (model, batch, memory plan, graphs)
  std::string config_yaml;          // the resolved configuration, shown folded
  bool gpu = true;                  // the GPU backend (device memory) or the CPU one (resident memory)
};

// Reads `metrics_path` (lines that are no JSON object with a "step", such as a torn last line, are skipped) and
// writes the page to `html_path` atomically. sg::Error when the page cannot be written.
void write_run_report(const std::string& metrics_path, const std::string& html_path, const RunReportInfo& info);

}  // namespace sg::train
