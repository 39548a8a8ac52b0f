#pragma once
// runs/<name>/report.html: the run as one self-contained page (inline SVG, no script, no network):
// loss and validation loss, learning rate, gradient norm, throughput, step time and memory over the
// steps, the CUDA-graph capture step marked, the evaluations as a table, and the run's header (model,
// batch, memory and graph plans, status). Built from runs/<name>/metrics.jsonl, so a resumed run's
// report shows the whole run.
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

// Reads `metrics_path` (missing or partly malformed lines are skipped) and writes the page to
// `html_path` atomically. sg::Error when the page cannot be written.
void write_run_report(const std::string& metrics_path, const std::string& html_path, const RunReportInfo& info);

}  // namespace sg::train
