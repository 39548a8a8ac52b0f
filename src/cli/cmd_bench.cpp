// stepgraph bench -m FAMILY -mr NAME [Megatron-Bridge run_script.py flags] [--compare MODES] [--steps N]
//                 [--warmup N] [--floor-steps N] [--json FILE] [--html FILE] [--trace FILE] [section.key=value ...]
// Measures the training step of one recipe in one or several CUDA-graph modes (bench/).
// Exit 0 measured (or --dryrun planned), 1 the request failed (rule violations, not implemented, no GPU,
// a CUDA error), 2 usage error, 128+signal when stopped by SIGINT/SIGTERM.
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <nlohmann/json.hpp>

#include "cli/command.h"
#include "core/error.h"
#include "core/log.h"
#include "core/strings.h"
#include "cuda/device.h"
#include "dist/local_launcher.h"
#include "dist/world_env.h"
#include "graph/registry.h"
#include "bench/bench_options.h"
#include "bench/bench_plan.h"
#include "bench/bench_runner.h"
#include "bench/bench_html.h"
#include "bench/chrome_trace.h"
#include "bench/report.h"
#include "config/config.h"
#include "train/distributed_run.h"
#include "train/progress.h"

namespace sg::cli {
namespace {

void write_text_file(const std::string& path, const std::string& text, const char* what) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out.good()) throw Error(strprintf("cannot write the %s to %s: %s", what, path.c_str(), std::strerror(errno)));
  out << text << "\n";
  out.close();
  if (out.fail()) throw Error(strprintf("writing the %s to %s failed: %s", what, path.c_str(), std::strerror(errno)));
}

// -ng N > 1 outside a launcher: this process starts N ranks of the same bench command (dist/local_launcher.h)
// and returns the failing rank's status. Inside one (WORLD_SIZE set), the world must be N.
// Under a launcher (or with -ng 1) the started ranks must be -ng: checked for --dryrun too, so the plan
// never promises a rank count the real run refuses.
void check_world_size(const bench::BenchOptions& options, const dist::WorldInfo& world) {
  if (world.world_size != options.num_gpus) {
    throw Error(strprintf("-ng %d, but %d rank%s were started (%s): start one rank per GPU, -ng the same number",
                          options.num_gpus, world.world_size, world.world_size == 1 ? "" : "s",
                          world.launcher == "slurm" ? "SLURM_NTASKS" : "WORLD_SIZE"));
  }
}

std::optional<int> launch_bench_ranks(const bench::BenchOptions& options, const std::vector<std::string>& args,
                                      const dist::WorldInfo& world) {
  if (world.distributed() || options.num_gpus == 1) {
    check_world_size(options, world);
    return std::nullopt;
  }
  const int gpus = cuda::device_count();
  // No GPU at all: "use -ng 0" or "-ng 1" would fail as well.
  if (gpus == 0) throw Error(bench::no_gpu_message());
  if (gpus < options.num_gpus) {
    const char* visible = std::getenv("CUDA_VISIBLE_DEVICES");
    throw Error(strprintf("-ng %d needs %d GPUs on this node; it has %d (CUDA_VISIBLE_DEVICES %s): use -ng %d or a "
                          "machine with more GPUs",
                          options.num_gpus, options.num_gpus, gpus, visible ? visible : "unset", std::max(gpus, 1)));
  }
  char self[PATH_MAX] = {0};
  SG_CHECK(::readlink("/proc/self/exe", self, sizeof(self) - 1) > 0, "stepgraph bench: cannot find its own executable");
  dist::LaunchOptions launch;
  launch.num_ranks = options.num_gpus;
  launch.argv = {self, "bench"};
  launch.argv.insert(launch.argv.end(), args.begin(), args.end());
  const dist::LaunchResult result = dist::launch_local(launch);
  if (result.exit_code != 0) std::fprintf(stderr, "stepgraph bench: %s\n", result.summary.c_str());
  return result.exit_code;
}

int run_bench_rank(const bench::BenchPlan& plan, const bench::BenchOptions& options,
                   train::DistributedRun* distributed);

int run_bench_command(const std::vector<std::string>& args) {
  using namespace bench;
  const BenchOptions options = parse_bench_args(args);
  const BenchPlan plan = plan_bench(options);  // every rule checked before any GPU work
  const dist::WorldInfo world = dist::world_from_env(dist::process_environment());
  // Once per command: by the process that measures or plans alone, or by rank 0 (not by a starter of ranks).
  const auto note_unused_overrides = [&options, &world] {
    const std::string note = unused_overrides_note(options);
    if (world.rank == 0 && !note.empty()) std::fprintf(stderr, "%s\n", note.c_str());
  };
  if (options.dryrun) {
    if (world.distributed()) check_world_size(options, world);
    note_unused_overrides();
    std::printf("%s", describe_plan(plan).c_str());
    return 0;
  }
  if (const std::optional<int> launched = launch_bench_ranks(options, args, world)) return *launched;
  if (cuda::device_count() == 0) {
    std::fprintf(stderr, "error: %s\n", no_gpu_message().c_str());
    return 1;
  }
  // One rank of a data-parallel bench: rank 0 reports, the others only measure with it.
  std::unique_ptr<train::DistributedRun> distributed;
  if (world.distributed()) {
    distributed = std::make_unique<train::DistributedRun>(world, dist::rendezvous_settings_from_env(
                                                                     dist::process_environment()));
    distributed->select_device();
    if (!distributed->is_writer()) log::set_level(log::Level::warn);
    // The ranks' flags made one plan (stepgraph launch, srun): each mode's configuration is every rank's.
    for (const bench::PlannedMode& mode : plan.modes) distributed->require_same_config(mode.config);
  }
  note_unused_overrides();
  try {
    const int rc = run_bench_rank(plan, options, distributed.get());
    if (distributed) distributed->finish();
    return rc;
  } catch (const std::exception& e) {
    if (distributed) distributed->report_failure(e.what());
    throw;
  }
}

int run_bench_rank(const bench::BenchPlan& plan, const bench::BenchOptions& options,
                   train::DistributedRun* distributed) {
  using namespace bench;

  const int64_t total_steps = static_cast<int64_t>(plan.modes.size()) * plan.steps_per_mode();
  train::Progress progress("bench", total_steps, !options.plain && train::Progress::stderr_is_terminal());
  BenchProgress callbacks;
  callbacks.line = [&progress](const std::string& text) { progress.line(text); };
  callbacks.update = [&progress](int64_t done, const std::string& status) { progress.update(done, status); };
  const BenchResults results = run_bench(plan, callbacks, distributed);
  progress.finish();
  if (distributed && !distributed->is_writer()) return 0;

  const BenchReport report = summarize(plan, results);
  std::printf("%s", format_report(plan, results, report).c_str());
  std::fflush(stdout);
  // Each output is written even when another failed (the paths were probed up front, so a failure here is
  // rare: a full disk); the failures are reported together at the end.
  std::vector<std::string> failed;
  const auto write = [&failed](const std::string& path, const std::function<void()>& body, const char* suffix) {
    if (path.empty()) return;
    try {
      body();
      std::fprintf(stderr, "wrote %s%s\n", path.c_str(), suffix);
    } catch (const std::exception& e) {
      failed.emplace_back(e.what());
    }
  };
  write(
      options.json_path,
      [&] { write_text_file(options.json_path, report_json(plan, results, report), "bench JSON"); }, "");
  write(options.html_path,
        [&] { write_text_file(options.html_path, report_html(plan, results, report), "bench HTML report"); }, "");
  write(
      options.trace_path,
      [&] {
        std::vector<TraceProcess> processes;
        for (const ModeResult& m : results.modes) processes.push_back({m.label, m.trace});
        const nlohmann::json metadata = {{"recipe", plan.recipe},
                                         {"device", results.env.device_name},
                                         {"what", "one steady-state step per mode: the first CUPTI floor step"}};
        write_chrome_trace(options.trace_path, processes,
                           metadata.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
      },
      " (open it in https://ui.perfetto.dev)");
  if (!failed.empty()) throw Error(join(failed, "; "));
  return 0;
}

const CommandRegistration kRegistration{"bench", 15, [](CLI::App& app, int& exit_code) {
  CLI::App* cmd = app.add_subcommand(
      "bench",
      "Measure the training step on the GPU in one or several CUDA-graph modes: step time (median, p90), "
      "tokens/s, TFLOP/s, MFU, host launch time, the CUPTI kernel-time floor and step/floor, capture time, "
      "graphs, and device memory against eager (and, for modes with activation recompute, step time and peak "
      "memory against the same mode without it). Flags follow Megatron-Bridge's "
      "scripts/performance/run_script.py; trailing section.key=value are recipe overrides.");
  // Bridge's -mr/-ng/-mb/-gb/-sl are multi-letter single-dash flags, which CLI11 cannot declare: the
  // arguments are collected unparsed and read by bench::parse_bench_args.
  cmd->allow_extras();
  cmd->footer("Flags:\n" + bench::bench_flags_help() +
              "\nExamples:\n"
              "  stepgraph bench -m llama -mr tiny -g h200 -c bf16 -ng 1 "
              "--compare none,local,transformer_engine:attn,transformer_engine:attn+mlp --json tiny.json\n"
              "  stepgraph bench -m llama -mr 1b --task pretrain -g h200 -c bf16 -ng 1 "
              "--cuda_graph_impl transformer_engine --cuda_graph_scope attn,mlp\n"
              "  stepgraph bench -m llama -mr small --compare none,local --trace small_trace.json "
              "train.micro_batch_size=4\n"
              "  stepgraph bench -m llama -mr tiny --compare none,local --html tiny.html\n"
              "  stepgraph bench -m llama -mr tiny --compare none,local --dryrun\n"
              "  stepgraph bench -m llama -mr 1b -mb 8 -gb 8 --compare local,local+recompute_full,"
              "transformer_engine:attn+mlp,transformer_engine:attn+mlp+recompute_selective=core_attn/mlp\n"
              "Exit 0 done, 1 the request failed (rule violations, not implemented yet, no GPU), 2 usage "
              "error, 130/143 stopped by SIGINT/SIGTERM. See docs/performance.md.");
  cmd->callback([cmd, &exit_code] {
    try {
      exit_code = run_bench_command(cmd->remaining());
    } catch (const config::ConfigError& e) {
      std::fprintf(stderr, "error: %s\n", e.what());
      exit_code = e.exit_code();
    } catch (const bench::BenchInterrupted& e) {
      std::fprintf(stderr, "%s; no report written\n", e.what());
      exit_code = graph::exit_code_for_stop();
    } catch (const sg::Error& e) {
      std::fprintf(stderr, "error: %s\n", e.what());
      exit_code = 1;
    }
  });
}};

}  // namespace
}  // namespace sg::cli
