// The run-end report over a long run's metrics.jsonl (train/run_report.h): writes a synthetic metrics.jsonl of
// --lines step records as MetricsLog writes them (loss a random walk with spikes, the graph capture at step 2, an
// evaluation every --eval-interval steps), then times write_run_report on it and prints the peak resident memory
// it added (getrusage: the process's maximum before and after). CPU only; writes the files under --dir.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <random>
#include <stdexcept>
#include <string>

#include "bench_args.h"
#include "train/run_report.h"

namespace {

long long peak_resident_kib() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss;  // KiB on Linux
}

void write_metrics(const std::string& path, long long lines, long long eval_interval) {
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) throw std::runtime_error("cannot write " + path);
  std::mt19937_64 rng(7);
  std::normal_distribution<double> noise(0.0, 0.02);
  std::uniform_real_distribution<double> unit(0.0, 1.0);
  double loss = 10.0;
  for (long long step = 1; step <= lines; ++step) {
    loss = std::max(1.5, loss * 0.99999 + noise(rng));
    const double shown = unit(rng) < 1e-4 ? loss * 3.0 : loss;  // a spike
    const bool capture = step == 2;
    std::fprintf(f,
                 "{\"step\": %lld, \"loss\": %.9g, \"grad_norm\": %.9g, \"lr\": %.9g, \"step_ms\": %.4f, "
                 "\"tokens_per_s\": %.1f, \"tflops_per_gpu\": %.3f, \"mfu\": %.5f, \"device_memory_used\": %llu, "
                 "\"wall_time_s\": %.3f, \"tokens\": %lld%s}\n",
                 step, shown, 0.5 + unit(rng), 3e-4 * std::min(1.0, static_cast<double>(step) / 2000.0),
                 capture ? 9000.0 : 1200.0 + 50.0 * unit(rng), 3.4e6 + 1e5 * unit(rng), 400.0 + unit(rng),
                 0.40 + 0.001 * unit(rng), 70000000000ULL + static_cast<unsigned long long>(step % 1000) * 4096,
                 1.2 * static_cast<double>(step), step * 4194304, capture ? ", \"capture\": true" : "");
    if (eval_interval > 0 && step % eval_interval == 0) {
      std::fprintf(f,
                   "{\"step\": %lld, \"val_loss\": %.9g, \"val_ppl\": %.9g, \"eval_batches\": 10, \"eval_ms\": %.1f, "
                   "\"wall_time_s\": %.3f, \"tokens\": %lld}\n",
                   step, loss + 0.05, std::exp(loss + 0.05), 812.5, 1.2 * static_cast<double>(step), step * 4194304);
    }
  }
  if (std::fclose(f) != 0) throw std::runtime_error("cannot write " + path);
}

}  // namespace

int main(int argc, char** argv) {
  const sg::bench::ToolArgs args = sg::bench::read_tool_args(
      argc, argv,
      {.program = "run_report_bench",
       .about = "Writes a synthetic metrics.jsonl of --lines step records (and an evaluation every --eval-interval\n"
                "steps) under --dir, then runs write_run_report on it (train/run_report.h) and prints its wall time,\n"
                "the peak resident memory it added and the report's size. CPU only.",
       .flags = {{.name = "--lines", .default_value = "2000000", .min = 1, .max = 1e9, .help = "step records"},
                 {.name = "--eval-interval",
                  .default_value = "1000",
                  .min = 0,
                  .max = 1e9,
                  .help = "an evaluation record every this many steps (0: none)"},
                 {.name = "--dir",
                  .value = sg::bench::ToolValue::text,
                  .default_value = "/tmp/run_report_bench",
                  .help = "where metrics.jsonl and report.html are written"},
                 {.name = "--reuse",
                  .value = sg::bench::ToolValue::none,
                  .help = "read an existing --dir/metrics.jsonl instead of writing one"}}});
  try {
    const std::filesystem::path dir = args.text("--dir");
    std::filesystem::create_directories(dir);
    const std::string metrics = (dir / "metrics.jsonl").string(), html = (dir / "report.html").string();
    if (!args.on("--reuse")) write_metrics(metrics, args.integer("--lines"), args.integer("--eval-interval"));
    const long long before = peak_resident_kib();
    const auto start = std::chrono::steady_clock::now();
    sg::train::RunReportInfo info;
    info.title = "stepgraph run: bench";
    info.status = "finished";
    sg::train::write_run_report(metrics, html, info);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const long long after = peak_resident_kib();
    std::printf("metrics.jsonl: %s, %.1f MB\n", metrics.c_str(),
                static_cast<double>(std::filesystem::file_size(metrics)) / 1e6);
    std::printf("write_run_report: %.2f s, peak resident memory %lld KiB before, %lld KiB after (+%lld KiB)\n", seconds,
                before, after, after - before);
    std::printf("report.html: %.1f KB\n", static_cast<double>(std::filesystem::file_size(html)) / 1e3);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "run_report_bench: %s\n", e.what());
    return 1;
  }
  return 0;
}
