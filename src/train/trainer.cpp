#include "train/trainer.h"

#include <chrono>
#include <memory>
#include <optional>

#include "checkpoint/save_dir_lock.h"
#include "config/model_config.h"
#include "config/tokenizer_vocab.h"
#include "config/validate.h"
#include "core/error.h"
#include "core/log.h"
#include "core/paths.h"
#include "core/strings.h"
#include "data/batch.h"
#include "model/layer_registry.h"
#include "train/backend_factory.h"
#include "train/batch_source.h"
#include "train/checkpointing.h"
#include "train/distributed_resume.h"
#include "train/distributed_run.h"
#include "train/evaluate_only.h"
#include "train/evaluation.h"
#include "train/host_memory.h"
#include "train/nonfinite_stop.h"
#include "train/pretrained.h"
#include "train/run_end.h"
#include "train/run_folder.h"
#include "train/run_plan.h"
#include "train/run_steps.h"
#include "train/save_dir_policy.h"

namespace sg::train {
namespace {

std::string violations_text(const config::ValidationReport& report) {
  std::string text = strprintf("the configuration breaks %zu rule(s); nothing was run:\n",
                               report.violations.size());
  for (const auto& v : report.violations) text += config::format_violation(v);
  return text;
}

// Prints a failure of the running phase at once, before the backend (and the device) is released,
// then hands it on as ReportedError.
[[noreturn]] void report_and_rethrow(const std::exception& e, int exit_code) {
  log::error(e.what());
  throw ReportedError(e.what(), exit_code);
}

// Data parallel: a failure once steps run is printed, told to the other ranks (they end at once), and ends this
// process before the backend is released: its stream may hold collectives of steps in flight that the others left,
// which the release would wait for forever (DistributedRun::end_failed_rank).
[[noreturn]] void end_failed_rank(DistributedRun& distributed, const std::exception& e, int exit_code) {
  log::error(e.what());
  distributed.end_failed_rank(e.what(), exit_code);
}

}  // namespace

TrainSummary train(const config::Config& raw_config, const TrainOptions& options) {
  const auto run_start = std::chrono::steady_clock::now();
  // checkpoint.pretrained_checkpoint fills unset shape keys from the folder's config.json (or refuses a
  // mismatch) before the configuration is validated.
  const config::ValidationReport report = config::validate(apply_pretrained_shapes(raw_config));
  if (!report.ok()) throw Error(violations_text(report));
  // What validate notes (settings without effect, values resolved) is said here too, before any work.
  for (const config::Note& note : report.notes) {
    std::string line = config::format_note(note);
    if (!line.empty() && line.back() == '\n') line.pop_back();
    log::info(line);
  }
  const config::Config& config = report.config;
  if (const auto missing = config::unimplemented_features(config); !missing.empty()) {
    throw Error("stepgraph train does not implement yet: " + join(missing, "; ") +
                ". Remove these settings (stepgraph validate lists them as notes).");
  }
  const model::ModelSpec model = config::model_spec(config);
  const model::BatchSpec batch = config::batch_spec(config);
  const int64_t train_iters = config.train.train_iters.value_or(0);
  // validation.skip_train evaluates instead of training (train/evaluate_only.h): no training data, no save.
  const bool skip_train = config.validation.skip_train;
  if (train_iters <= 0 && !skip_train) throw Error("train.train_iters must be set to a positive number of steps");
  DistributedRun* const distributed = options.distributed;
  const int world_size = distributed ? distributed->world_size() : 1;
  const int rank = distributed ? distributed->rank() : 0;
  SG_CHECK(batch.data_parallel_size == world_size,
           strprintf("the config's data_parallel_size %lld differs from the %d rank(s) running",
                     static_cast<long long>(batch.data_parallel_size), world_size));

  // Everything that can be checked before a step is: the run folder, host memory, tokenizer, data (training
  // and validation), checkpoint directories and the checkpoint to resume. Bad input fails fast, before any
  // device memory is planned.
  checkpoint::check_directory_writable(options.run_dir, "the run folder (--run-dir)");
  // One run at a time per run folder, by the same lock as checkpoint.save's (which covers a run folder that is
  // checkpoint.save itself): two runs writing one folder would mix their records and overwrite each other's report.
  checkpoint::SaveDirLock run_dir_lock;
  if (!config.checkpoint.save || !same_directory(options.run_dir, *config.checkpoint.save)) {
    run_dir_lock = checkpoint::SaveDirLock::acquire(options.run_dir, "the run folder (--run-dir)",
                                                    "two runs writing one run folder mix their records");
  }
  const bool cpu_backend = uses_cpu_backend(options.force_cpu);
  // Every data-parallel rank on this node holds its own batches, at the same time, and the upload buffers of a resume
  // or a pretrained start (the files it reads are mapped: page cache, shared by the ranks); only rank 0 downloads the
  // state it saves (the others join the distributed optimizer's gathers without a copy).
  check_host_memory(plan_host_memory(model, batch,
                                     {.cpu_backend = cpu_backend,
                                      .checkpoint_save = config.checkpoint.save.has_value() && !skip_train,
                                      .checkpoint_load = may_resume(config.checkpoint) ||
                                                         config.checkpoint.pretrained_checkpoint.has_value(),
                                      .ranks_on_node = distributed ? distributed->world().ranks_on_node() : 1,
                                      .ranks_source = distributed ? distributed->world().ranks_on_node_source() : "",
                                      .writes_checkpoints = distributed == nullptr || distributed->is_writer()}),
                    host_memory_limits());
  RunContext run;
  run.start = run_start;
  run.tokenizer = config::load_tokenizer(config);
  run.checkpoint_export = checkpoint_export(config, run.tokenizer);
  data::BatchOptions batch_options;
  batch_options.eod_mask_loss = config.dataset.eod_mask_loss;
  if (run.tokenizer) batch_options.eod_token = run.tokenizer->eod_id;
  if (batch_options.eod_mask_loss && batch_options.eod_token < 0) {
    throw Error("dataset.eod_mask_loss: the tokenizer in " +
                (run.tokenizer ? run.tokenizer->dir : std::string("(none)")) +
                " names no eos_token (tokenizer_config.json), so there is no EOD id to mask; set "
                "dataset.eod_mask_loss=false or use a tokenizer with an eos token");
  }
  // The ranks scan a part of each corpus their loaders open, and combine the parts: the run reads a corpus once.
  const DataRank data_rank{.rank = rank,
                           .scan_share = distributed ? distributed->corpus_scan_share() : data::ScanShare{}};
  std::optional<BatchSource> data;
  if (!skip_train) {
    with_host_allocation("the input batch buffers (train.global_batch_size x model.seq_length tokens)",
                         [&] { data.emplace(config, model, batch, batch_options, data_rank); });
  }
  // One evaluation, or one a validation set (validation.multiple_validation_sets).
  std::vector<std::unique_ptr<Evaluation>> evaluations;
  with_host_allocation("the validation batch buffers", [&] {
    for (const config::ValidationSet& set : config::validation_sets(config)) {
      evaluations.push_back(
          std::make_unique<Evaluation>(config, model, batch, batch_options, data_rank, EvalData::validation, set));
      run.evaluations.push_back(evaluations.back().get());
    }
  });
  std::optional<Evaluation> test_evaluation;
  with_host_allocation("the test batch buffers", [&] {
    test_evaluation.emplace(config, model, batch, batch_options, data_rank, EvalData::test);
  });
  run.test_evaluation = &*test_evaluation;
  // Data parallel: rank 0 owns checkpoint.save (its lock, its policy) and tells the others what to resume.
  const config::CheckpointConfig checkpoint_settings =
      skip_train ? checkpoint_to_evaluate(config.checkpoint) : config.checkpoint;
  CheckpointDirs dirs;
  if (distributed == nullptr || distributed->is_writer()) dirs = prepare_checkpoint_dirs(checkpoint_settings);
  if (!dirs.note.empty()) log::info(dirs.note);
  if (distributed) {  // rank 0 resolves the iteration folder and every rank loads that one (train/distributed_resume.h)
    const std::optional<ResumeFolder> folder =
        resume_folder_everywhere(*distributed, dirs.resume_from, resume_key(checkpoint_settings));
    dirs.resume_from = folder ? std::optional<std::string>(folder->path) : std::nullopt;
    if (folder && !folder->note.empty()) log::info(folder->note);
  }
  std::optional<LoadedCheckpoint> loaded;
  if (dirs.resume_from) {
    with_host_allocation("the checkpoint's weights and optimizer state", [&] {
      const auto load = [&] {
        return load_checkpoint(*dirs.resume_from, config, model::model_layout(model), resume_key(checkpoint_settings));
      };
      loaded = distributed ? load_resume_folder(*distributed, *dirs.resume_from, load) : load();
    });
    if (!loaded->note.empty()) log::info(loaded->note);
    // Before any device work: a refusal says nothing about resuming.
    if (data) resume_data_position(*loaded, data->loader());
  }
  if (distributed) require_same_resume(*distributed, loaded);  // every rank resumed the same step and train state
  run.dirs = &dirs;
  // A resumed run keeps its run id; a fresh one gets rank 0's new one (every rank's folder names the same run).
  run.run_id = loaded && !loaded->run_id.empty() ? loaded->run_id : new_run_id();
  if (distributed) run.run_id = distributed->broadcast_from_rank0("run_id", [&run] { return run.run_id; });
  // A resumed run's saves keep what the folder it loaded keeps (the context and ids of its first run's source).
  if (loaded) run.checkpoint_export.source = resumed_checkpoint_source(loaded->path);
  // A checkpoint to resume wins; otherwise checkpoint.pretrained_checkpoint starts the run at step 0.
  std::optional<PretrainedStart> pretrained;
  if (!loaded && config.checkpoint.pretrained_checkpoint)
    pretrained = pretrained_state(config, model::model_layout(model));

  // The validation plan, and the test split's when it has one (or why a share it has is skipped).
  const auto log_evaluations = [&] {
    for (const Evaluation* evaluation : run.evaluations) log::info(evaluation->describe());
    if (test_evaluation->enabled() || !test_evaluation->skipped_because().empty()) {
      log::info(test_evaluation->describe());
    }
  };

  TrainSummary summary;
  summary.start_step = loaded ? loaded->state.steps_done : 0;
  if (skip_train) {
    summary.steps_done = summary.start_step;
    log::info(describe_model(config));
    if (run.tokenizer) log::info("tokenizer: " + run.tokenizer->describe());
    log_evaluations();
    std::unique_ptr<TrainingBackend> backend;
    with_host_allocation(cpu_backend ? "the CPU backend's model" : "the GPU backend's host buffers",
                         [&] { backend = make_backend(config, options.force_cpu, distributed); });
    try {
      summary.evaluation_path =
          evaluate_only(config, options, *backend, loaded, pretrained, run.evaluations, *test_evaluation);
    } catch (const std::exception& e) {
      if (distributed) end_failed_rank(*distributed, e, 1);
      report_and_rethrow(e, 1);
    }
    return summary;
  }
  summary.steps_done = summary.start_step;
  summary.train_iters = train_iters;
  if (summary.start_step >= train_iters) {
    log::info(strprintf("%s is at step %lld and train.train_iters = %lld: nothing to train%s", loaded->path.c_str(),
                        static_cast<long long>(summary.start_step), static_cast<long long>(train_iters),
                        dirs.overwrite_pending ? " (and nothing saved, so checkpoint.overwrite removed nothing)" : ""));
    return summary;
  }

  // What will run, before the (slow) device setup; and, before any step, that its weights will not be kept.
  if (!config.checkpoint.save) log::info(unsaved_weights_note(/*ended=*/false));
  log::info(describe_model(config));
  log::info(describe_batch(config));
  if (run.tokenizer) {
    log::info(strprintf("tokenizer: %s; model.vocab_size %lld", run.tokenizer->describe().c_str(),
                        static_cast<long long>(model.vocab_size)));
  }
  log::info("data: " + data->loader().describe());
  log_evaluations();

  std::unique_ptr<TrainingBackend> backend;
  with_host_allocation(cpu_backend ? "the CPU backend's model (weights, gradients, Adam moments, activations)"
                                   : "the GPU backend's host buffers",
                       [&] { backend = make_backend(config, options.force_cpu, distributed); });
  try {
    run_steps(config, options, model, batch, *backend, *data, loaded, pretrained, run, summary);
  } catch (const NonFiniteError& e) {
    if (distributed) end_failed_rank(*distributed, e, kExitNonFinite);
    report_and_rethrow(e, kExitNonFinite);
  } catch (const std::exception& e) {
    if (distributed) end_failed_rank(*distributed, e, 1);
    report_and_rethrow(e, 1);
  }
  return summary;
}

}  // namespace sg::train
