// stepgraph train RECIPE [overrides...]
#include <cstdlib>
#include <filesystem>
#include <optional>

#include "cli/command.h"
#include "config/config.h"
#include "config/graph_flags.h"
#include "core/error.h"
#include "core/log.h"
#include "core/strings.h"
#include "cuda/device.h"
#include "dist/world_env.h"
#include "train/distributed_run.h"
#include "train/progress.h"
#include "train/run_end.h"
#include "train/run_folder.h"
#include "train/trainer.h"

namespace sg::cli {
namespace {

struct TrainArgs {
  std::string recipe = config::kDefaultRecipe;
  std::vector<std::string> overrides;
  std::vector<std::string> config_files;  // --config-file, over the recipe before the overrides
  std::string run_dir;
  bool cpu = false;
  bool plain = false;
  std::string dump_batches;
  std::string rendezvous_file;
  // Bridge's run_script.py flags; given empty (an unset shell variable) they are checked, and refused, as bench does.
  std::optional<std::string> cuda_graph_impl;   // --cuda_graph_impl
  std::optional<std::string> cuda_graph_scope;  // --cuda_graph_scope a,b
};

// runs/<name>: a shipped recipe's name ("llama/tiny" -> tiny), a YAML file's stem ("my/run.yaml" -> run).
std::string default_run_dir(const std::string& recipe) {
  const std::string source = config::find_recipe(recipe).name;
  if (const auto own_folder = train::run_folder_of_config(source)) return *own_folder;
  std::filesystem::path name = std::filesystem::path(source).filename();
  const std::string ext = name.extension().string();
  if (ext == ".yaml" || ext == ".yml") name = name.stem();
  return (std::filesystem::path("runs") / name).string();
}

int run_train(const TrainArgs& args) {
  std::vector<std::string> overrides = args.overrides;
  std::string recipe = args.recipe;
  // `stepgraph train model.x=1` (no recipe) trains the default recipe with the override.
  if (!config::is_recipe_argument(recipe)) {
    overrides.insert(overrides.begin(), recipe);
    recipe = config::kDefaultRecipe;
  }
  config::Config config;
  try {
    config = config::load_config(recipe, args.config_files, overrides);
    // Bridge's flags and their side effects (graph-safe RNG on; unlike Bridge, the loss NaN check stays
    // as configured, since its flags are computed inside the graph): the same rule as `stepgraph bench`,
    // so turning graphs on is one flag.
    config::CudaGraphFlags flags;
    if (args.cuda_graph_impl) {
      config::check_impl_flag(*args.cuda_graph_impl);
      flags.impl = *args.cuda_graph_impl;
    }
    if (args.cuda_graph_scope) flags.scope = config::parse_scope_flag(*args.cuda_graph_scope);
    if (flags.impl || flags.scope) config::apply_cuda_graph_overrides(config, flags);
  } catch (const config::ConfigError& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return e.exit_code();
  }
  train::TrainOptions options;
  options.run_dir = args.run_dir.empty() ? default_run_dir(recipe) : args.run_dir;
  options.force_cpu = args.cpu;
  options.dump_batches_dir = args.dump_batches;
  options.interactive = !args.plain && train::Progress::stderr_is_terminal();

  // Data parallelism: the launcher's environment (stepgraph launch, torchrun, srun) says who this
  // process is; joining waits for every rank (docs/distributed.md).
  if (!args.rendezvous_file.empty()) ::setenv("STEPGRAPH_RENDEZVOUS_FILE", args.rendezvous_file.c_str(), 1);
  const dist::WorldInfo world = dist::world_from_env(dist::process_environment());
  if (world.distributed() && world.rank != 0) log::set_level(log::Level::warn);  // rank 0 speaks for the run
  train::refuse_cpu_backend_for_ranks(world, args.cpu);  // before the rendezvous waits for the other ranks
  const std::unique_ptr<train::DistributedRun> distributed = train::DistributedRun::from_environment();
  if (distributed) {
    if (cuda::device_count() > 0 && !args.cpu) distributed->select_device();  // before any other CUDA work
    // As loaded, before the changes below that are the rank's own (its tensorboard_dir). Every rank throws the same
    // error when they differ.
    distributed->require_same_config(config);
    config.data_parallel_size = distributed->world_size();
    options.distributed = distributed.get();
    if (!distributed->is_writer()) {
      // The others keep their metrics (and dumped batches) apart, and print only warnings and errors.
      const std::string rank_dir = strprintf("rank%d", distributed->rank());
      options.run_dir = (std::filesystem::path(options.run_dir) / rank_dir).string();
      if (!options.dump_batches_dir.empty()) {
        options.dump_batches_dir = (std::filesystem::path(options.dump_batches_dir) / rank_dir).string();
      }
      options.interactive = false;
      config.logger.tensorboard_dir.reset();  // rank 0's events are the run's
    }
  }
  train::TrainSummary summary;
  try {
    summary = train::train(config, options);
    if (distributed) distributed->finish();
  } catch (const train::ReportedError& e) {
    if (distributed) distributed->report_failure(e.what());  // the other ranks end now, saying why
    return e.exit_code();  // already printed, before the device was released
  } catch (const std::exception& e) {
    if (distributed) distributed->report_failure(e.what());
    throw;
  }
  // The line users read last: how the run ended (finished or stopped), its numbers and files, and what to do next.
  if (summary.steps_run() > 0 && (!distributed || distributed->is_writer())) {
    std::fprintf(stderr, "%s\n", train::run_summary_line(summary).c_str());
  }
  return summary.stopped_by_signal ? 128 + summary.stop_signal : 0;
}

const CommandRegistration kRegistration{"train", 10, [](CLI::App& app, int& exit_code) {
  auto args = std::make_shared<TrainArgs>();
  CLI::App* cmd = app.add_subcommand(
      "train",
      "Train a model: GPT blocks (attention and MLP, or MoE when model.num_moe_experts is set) or a hybrid "
      "pattern of attention (*), MLP (-), MoE (E) and Mamba2 (M) layers. On a GPU: bf16 with CUDA graphs as "
      "model.cuda_graph_impl says (or --cuda_graph_impl/--cuda_graph_scope, as in bench); without one: the CPU "
      "fp32 reference backend (graphs off). Writes runs/<name>/config.yaml, run.json, metrics.jsonl (steps and "
      "validation) and report.html; TensorBoard events with logger.tensorboard_dir. Validation: "
      "validation.eval_interval with dataset.split or dataset.valid_data_path; validation.skip_train=true "
      "checkpoint.load=DIR evaluates a checkpoint instead of training (runs/<name>/evaluations/iter_N.json). Your "
      "own text: dataset.mock=false "
      "dataset.data_path=[PREFIX] tokenizer.tokenizer_type=HuggingFaceTokenizer tokenizer.tokenizer_model=DIR "
      "(README \"Your own data\"; the shipped benchmark recipes are mock). "
      "SIGINT/SIGTERM/SIGHUP finish the current step, save a checkpoint when checkpoint.save is set, write the "
      "report and exit (status 130/143/129). Exit status: 0 trained, 1 an error (invalid config, bad data or "
      "checkpoint, ...), 2 usage or parse error, 3 stopped by a NaN/Inf "
      "(rerun_state_machine.check_for_nan_in_loss, ddp.check_for_nan_in_grad, or a refused save of a "
      "non-finite state). Data parallel when started by `stepgraph launch -n N -- train ...`, torchrun "
      "(--no-python) or srun "
      "(one rank per GPU; docs/distributed.md): a signal to any rank stops every rank after the same step, each "
      "exiting with that signal's status; a rank that fails ends the others with status 70.");
  cmd->add_option("recipe", args->recipe,
                  "recipe name (llama/tiny, llama/demo, ...) or a YAML path; default llama/demo");
  cmd->add_option("overrides", args->overrides, "dotted overrides: train.train_iters=50 model.cuda_graph_impl=local");
  add_config_file_option(*cmd, args->config_files);
  cmd->add_option("--run-dir", args->run_dir,
                  "where config.yaml, metrics.jsonl and report.html go (default runs/<recipe name or YAML file stem>); "
                  "another run's files there move to previous/run-<k>/ (a resume continues its own run's)");
  cmd->add_option("--cuda_graph_impl", args->cuda_graph_impl,
                  join(config::cuda_graph_impl_names(), ", ") +
                      " (Bridge's flag: not none also turns both RNG-tracker keys on; the NaN checks stay as "
                      "configured, unlike Bridge: they run inside the graph)");
  cmd->add_option("--cuda_graph_scope", args->cuda_graph_scope,
                  config::cuda_graph_scope_list() +
                      " (Bridge's flag; comma-separated; needs a graph impl: --cuda_graph_impl, or the recipe's)");
  cmd->add_flag("--cpu", args->cpu, "use the CPU reference backend even when a GPU is present");
  cmd->add_flag("--plain", args->plain, "plain log lines instead of a progress bar");
  cmd->add_option("--rendezvous-file", args->rendezvous_file,
                  "data parallel: find rank 0 through this file on a shared filesystem instead of "
                  "MASTER_ADDR:MASTER_PORT (MASTER_PORT + 1 under torchrun's agent store, or STEPGRAPH_STORE_PORT) "
                  "(STEPGRAPH_RENDEZVOUS_FILE)");
  cmd->add_option("--dump-batches", args->dump_batches,
                  "write every step's batch to DIR/batch_<step>.safetensors (tokens, targets, loss_mask)");
  cmd->callback([args, &exit_code] { exit_code = run_train(*args); });
}};

}  // namespace
}  // namespace sg::cli
