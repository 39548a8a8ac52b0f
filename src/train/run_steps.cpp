// The step loop (run_steps.h): submits and collects steps, records and prints their metrics, evaluates, saves,
// and stops every rank after the same step.
#include "train/run_steps.h"

#include <chrono>
#include <cmath>
#include <filesystem>

#include "checkpoint/safetensors.h"
#include "core/error.h"
#include "core/log.h"
#include "core/signal_name.h"
#include "core/strings.h"
#include "graph/registry.h"
#include "train/distributed_run.h"
#include "train/metrics.h"
#include "train/nonfinite_stop.h"
#include "train/progress.h"
#include "train/progress_lines.h"
#include "train/run_end.h"
#include "train/run_folder.h"
#include "train/run_plan.h"
#include "train/run_recorder.h"
#include "train/save_dir_policy.h"
#include "train/stop_grace.h"

namespace sg::train {
namespace {

void dump_batch(const std::string& dir, int64_t step, const model::HostBatch& batch, int64_t sequences,
                int64_t seq_length) {
  using checkpoint::TensorDtype;
  const std::vector<int64_t> shape = {sequences, seq_length};
  const checkpoint::TensorRef tensors[] = {
      {"tokens", TensorDtype::I32, shape, batch.tokens.data()},
      {"targets", TensorDtype::I32, shape, batch.targets.data()},
      {"loss_mask", TensorDtype::F32, shape, batch.loss_mask.data()},
  };
  checkpoint::write_safetensors(
      (std::filesystem::path(dir) / strprintf("batch_%07lld.safetensors", static_cast<long long>(step))).string(),
      tensors);
}

// SIGINT/SIGTERM/SIGHUP handling for the duration of a run, on every way out. The watchdog's grace
// grows with the slowest step, evaluation and save measured so far (train/stop_grace.h).
class StopHandlers {
 public:
  explicit StopHandlers(const StopGraceInputs& inputs) : inputs_(inputs) { update(); }
  ~StopHandlers() { graph::uninstall_stop_handlers(); }
  StopHandlers(const StopHandlers&) = delete;
  StopHandlers& operator=(const StopHandlers&) = delete;
  void step_took(double seconds) {
    if (seconds <= inputs_.step_seconds * 1.25) return;  // re-arm only on a real change
    inputs_.step_seconds = seconds;
    update();
  }
  void save_took(double seconds) {
    if (seconds <= inputs_.save_seconds) return;
    inputs_.save_seconds = seconds;
    update();
  }
  void eval_took(double seconds) {
    if (seconds <= inputs_.eval_seconds) return;
    inputs_.eval_seconds = seconds;
    update();
  }

 private:
  void update() { graph::install_stop_handlers(stop_grace_seconds(inputs_)); }
  StopGraceInputs inputs_;
};

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// The largest per-expert token count over the mean (1 = balanced), over all MoE layers.
double max_expert_load(const std::vector<std::vector<int32_t>>& rows) {
  double worst = 0.0;
  for (const auto& row : rows) {
    double sum = 0.0, top = 0.0;
    for (int32_t n : row) {
      sum += n;
      top = std::max(top, static_cast<double>(n));
    }
    if (sum > 0) worst = std::max(worst, top * static_cast<double>(row.size()) / sum);
  }
  return worst;
}

// The tokens a run consumed by the end of `step`: the samples before its baseline, then one global batch a step
// (a resume that changed train.global_batch_size starts a new baseline; checkpointing.h).
int64_t tokens_consumed(const SamplesBaseline& baseline, int64_t step, const model::BatchSpec& batch,
                        const model::ModelSpec& model) {
  const int64_t sequences_per_step = batch.global_microbatches() * batch.micro_batch_size;
  return (static_cast<int64_t>(baseline.consumed_samples) + (step - baseline.iteration) * sequences_per_step) *
         model.seq_length;
}

StepMetrics to_metrics(const StepResult& r, double flops, double peak_tflops, double tokens, int64_t tokens_so_far,
                       uint64_t memory_used) {
  StepMetrics m;
  m.capture = r.capture_step;
  m.tokens = tokens_so_far;
  m.step = r.step;
  m.loss = r.loss;
  m.grad_norm = r.grad_norm;
  m.lr = r.lr;
  m.step_ms = r.step_ms;
  const double seconds = r.step_ms / 1e3;
  m.tokens_per_s = seconds > 0 ? tokens / seconds : 0.0;
  m.tflops_per_gpu = seconds > 0 ? flops / seconds / 1e12 : 0.0;
  m.mfu = peak_tflops > 0 ? m.tflops_per_gpu / peak_tflops : 0.0;
  m.device_memory_used = memory_used;
  return m;
}

}  // namespace

void run_steps(const config::Config& config, const TrainOptions& options, const model::ModelSpec& model,
               const model::BatchSpec& batch, TrainingBackend& backend, BatchSource& data,
               std::optional<LoadedCheckpoint>& loaded, std::optional<PretrainedStart>& pretrained,
               const RunContext& run, TrainSummary& summary) {
  const int64_t train_iters = config.train.train_iters.value_or(0);
  const int64_t start_step = summary.start_step;
  const Evaluation& evaluation = *run.evaluations.front();  // the schedule, which every validation set shares
  const bool gpu = backend.on_gpu();
  log::info(backend.description());
  std::vector<std::string> plan_lines = {describe_model(config), describe_batch(config), describe_optimizer(config)};
  if (gpu) {
    plan_lines.push_back("GPU memory plan (the arena, as allocated):\n" + backend.memory_plan());
    for (const auto& line : backend.start_report()) plan_lines.push_back(line);
  } else {
    plan_lines.push_back(backend.memory_plan());
    plan_lines.push_back("on a GPU: " + describe_gpu_memory_plan(config));
    plan_lines.push_back("on a GPU: " + describe_graph_plan(config) + "; the CPU backend runs every step eagerly");
  }
  plan_lines.push_back(describe_activation_plan(config));
  for (size_t i = 2; i < plan_lines.size(); ++i) log::info(plan_lines[i]);
  if (loaded) {
    backend.load_state(loaded->state);  // the loader is at its data position already (resume_data_position)
    // The backend holds its own copy now. The mapped files' pages (12 bytes a parameter, file-backed) would otherwise
    // stay resident in this process until the run ends, beside the copy each save makes.
    loaded->release_state();
    log::info(strprintf("resumed from %s at step %lld", loaded->path.c_str(), static_cast<long long>(start_step)));
  } else if (pretrained) {
    backend.load_state(pretrained->state);
    pretrained.reset();  // unmaps the weight files (their pages would otherwise stay resident in this process)
  }

  const RunFolderStart folder =
      start_run_folder(options.run_dir, loaded ? std::optional<std::string>(loaded->run_id) : std::nullopt);
  if (folder.archived_to) {
    log::warn(strprintf("%s held the records of %s: moved them to %s", options.run_dir.c_str(),
                        loaded ? "another run than the checkpoint's" : "an earlier run", folder.archived_to->c_str()));
  }
  if (folder.restored_from) {
    log::info(strprintf("%s: the checkpoint's run's records are back from %s", options.run_dir.c_str(),
                        folder.restored_from->c_str()));
  }
  // Records after the checkpoint's step belong to a run that went further: kept in previous/, cut here.
  const RecordsCut cut = folder.continues ? cut_records_after(options.run_dir, start_step) : RecordsCut{};
  log_records_cut(cut, options.run_dir, start_step);
  const double flops = training_flops_per_step(model, batch);
  const double peak = peak_bf16_tflops(backend.device_name());
  // Tokens of the whole global batch (every rank's): tok/s is the run's; TFLOP/s and MFU stay per GPU.
  const double tokens = static_cast<double>(batch.global_microbatches() * batch.tokens_per_microbatch(model));
  const SamplesBaseline samples_baseline = loaded ? loaded->samples_baseline : SamplesBaseline{};
  DistributedRun* const distributed = options.distributed;
  const bool writer = distributed == nullptr || distributed->is_writer();
  RunReportInfo run_report;
  run_report.title = "stepgraph run: " + std::filesystem::path(options.run_dir).filename().string();
  run_report.gpu = gpu;
  run_report.plan = plan_lines;
  run_report.facts = {{"backend", backend.description()},
                      {"run folder", options.run_dir},
                      {"tokens per step", thousands(static_cast<int64_t>(tokens))},
                      {"FLOPs per step per GPU", strprintf("%.4g", flops)}};
  if (run.tokenizer) run_report.facts.emplace_back("tokenizer", run.tokenizer->describe());
  if (config.checkpoint.save) run_report.facts.emplace_back("checkpoints", *config.checkpoint.save);
  RunRecorder recorder(config, options.run_dir,
                       {.resumed = folder.continues, .config_kept = cut.kept_in.has_value(), .start_step = start_step},
                       run.run_id, run_report);
  summary.metrics_path = recorder.metrics_path();
  summary.report_path = recorder.report_path();
  if (!recorder.tensorboard_path().empty()) log::info("TensorBoard events: " + recorder.tensorboard_path());
  const int64_t log_interval = std::max<int64_t>(1, config.logger.log_interval);
  const int64_t save_interval = config.checkpoint.save_interval.value_or(0);

  Progress progress("train", train_iters, options.interactive, start_step);
  backend.notify = [&progress](const std::string& text) { progress.line(text); };

  // A stop finishes the current step (or evaluation) and saves: the watchdog's grace covers them.
  StopHandlers stop_handlers({.saves = config.checkpoint.save.has_value(),
                              .checkpoint_bytes = 14.0 * static_cast<double>(backend.layout().total()),
                              .eval_batches = [&run] {
                                int64_t batches = 0;
                                for (const Evaluation* e : run.evaluations) {
                                  if (e->enabled()) batches += e->batching().submissions;
                                }
                                return batches;
                              }()});

  // A checkpoint is taken only after collect(0): every submitted step is finished, so the loader's
  // position is exactly the data the saved state has consumed.
  bool have_first = false;
  int64_t last_saved = -1;
  int64_t eval_skipped_at = -1, last_val_step = -1;  // a due evaluation a stop skipped; the last one recorded
  int64_t submitted = start_step;
  std::string metrics_error;  // a failed metrics write stops the run like a signal (save, then fail)
  std::string val_status;
  const auto record = [&](const auto& write) {
    try {
      write();
    } catch (const Error& e) {
      if (metrics_error.empty()) metrics_error = e.what();
    }
  };

  auto save = [&](int64_t step) {
    if (!config.checkpoint.save || step == last_saved) return;
    const auto start = std::chrono::steady_clock::now();
    // Rank 0 downloads the state it writes. The others join its collectives (the distributed optimizer's gathers of
    // the shards) without a host copy: theirs would be thrown away unwritten, 12 bytes a parameter on every rank.
    TrainingState state;
    if (writer) {
      state = backend.state();
    } else {
      backend.join_state_gather();
    }
    std::string dir;
    RetentionOutcome retention;
    // Rank 0 writes the run's one checkpoint.
    const auto write = [&] {
      if (run.dirs != nullptr && run.dirs->overwrite_pending) {  // checkpoint.overwrite: nothing removed before now
        check_state_finite(state, backend.layout(), config);     // a refused save removes nothing either
        const std::string removed = remove_overwritten_checkpoints(*run.dirs);
        if (!removed.empty()) progress.line(removed);
      }
      const ResumeRecord resume_record{
          .run_id = run.run_id, .samples_baseline = samples_baseline, .eval_pending = eval_skipped_at == step};
      dir = save_checkpoint(*config.checkpoint.save, config, backend.layout(), state, data.loader().position(),
                            resume_record, run.checkpoint_export);
      // checkpoint.most_recent_k, once the new folder is durable and `latest` names it; inside the write, so the other
      // ranks wait for it at save_everywhere's barrier. It never throws: the save succeeded whatever it removes.
      retention = apply_checkpoint_retention(config.checkpoint, {.on_stage = options.on_checkpoint_removal});
    };
    if (distributed == nullptr) {
      write();
    } else {
      // Every rank returns once rank 0's write is done (or every rank ends naming its failure): one that went on
      // and failed would abort rank 0 in the middle of the write.
      distributed->save_everywhere(step, write);
    }
    // Every rank: the others waited as long as rank 0 wrote, and their stop watchdog must cover that wait too.
    const double seconds = seconds_since(start);
    stop_handlers.save_took(seconds);
    last_saved = step;
    if (!writer) return;
    progress.line(strprintf("saved checkpoint %s (%.1f s)", dir.c_str(), seconds));
    if (!retention.line.empty()) progress.line(retention.line);
    for (const std::string& warning : retention.warnings) log::warn(warning);
    if (options.on_saved) options.on_saved(step);
  };

  auto handle = [&](const StepResult& r) {
    check_step_finite(r, config, submitted);
    if (!have_first) {
      summary.first_loss = r.loss;
      have_first = true;
    }
    summary.last_loss = r.loss;
    summary.steps_done = r.step;
    stop_handlers.step_took(r.step_ms / 1e3);
    StepMetrics m = to_metrics(r, flops, peak, tokens, tokens_consumed(samples_baseline, r.step, batch, model),
                               backend.device_memory_used());
    m.wall_time_s = seconds_since(run.start);
    m.moe = model.num_moe_experts > 0;
    m.aux_loss = r.aux_loss;
    m.z_loss = r.z_loss;
    const bool log_step = r.step % log_interval == 0 || r.step == train_iters;
    if (m.moe && log_step) m.moe_tokens = backend.moe_token_counts();  // the latest finished step's
    record([&] { recorder.step(m); });
    if (r.capture_step) {
      progress.line(strprintf("step %lld captured the CUDA graphs (%.1f ms including capture; not in the averages)",
                              static_cast<long long>(r.step), r.step_ms));
    }
    if (r.step % log_interval == 0 || r.step == train_iters) {
      progress.line(format_step_line(m, train_iters, gpu, peak > 0) +
                    (m.moe ? strprintf(" | moe aux loss %.4g | z loss %.4g | expert load max/mean %.2f", m.aux_loss,
                                       m.z_loss, max_expert_load(m.moe_tokens))
                           : std::string()));
    }
    progress.update(r.step, strprintf("loss %.4f", r.loss) + val_status);
  };

  // `finish`: the evaluation after the last step, which a stop does not cut short (the run is otherwise complete).
  auto evaluate = [&](int64_t step, bool finish) {
    for (const StepResult& r : backend.collect(0)) handle(r);
    // A stop ends a lone process's evaluation between batches (the rest of the run is the final save
    // and report); data parallel ranks finish it, as one rank leaving would hang the others' reduction.
    // One evaluation a validation set (multiple_validation_sets), recorded only when all of them ran whole.
    std::vector<std::pair<const Evaluation*, EvalResult>> results;
    double ms = 0.0;
    for (Evaluation* set : run.evaluations) {
      const EvalResult e =
          set->run(backend, [distributed, finish] { return !distributed && !finish && graph::stop_requested(); });
      ms += e.ms;
      if (e.batches < set->iters()) {
        stop_handlers.eval_took(ms / 1e3);
        eval_skipped_at = step;
        progress.line(
            strprintf("step %lld: stop requested: the evaluation%s ended after %lld of %lld batches (not "
                      "recorded)",
                      static_cast<long long>(step),
                      set->set_name().empty() ? "" : (" of validation set " + set->set_name()).c_str(),
                      static_cast<long long>(e.batches), static_cast<long long>(set->iters())));
        return;
      }
      results.emplace_back(set, e);
    }
    stop_handlers.eval_took(ms / 1e3);
    const int64_t tokens = tokens_consumed(samples_baseline, step, batch, model);
    summary.val_set_losses.clear();
    for (const auto& [set, e] : results) {
      EvalMetrics m = eval_metrics(step, e, /*test=*/false, seconds_since(run.start), tokens);
      m.set = set->set_name();
      record([&] { recorder.eval(m); });
      if (e.captured)
        progress.line(strprintf("step %lld: captured the evaluation graph", static_cast<long long>(step)));
      progress.line(format_eval_line(m));
      if (!m.set.empty()) summary.val_set_losses.emplace_back(m.set, e.loss);
    }
    if (!metrics_error.empty()) eval_skipped_at = step;  // not recorded: a resumed run evaluates it again
    summary.last_val_loss = results.front().second.loss;  // the first set's with several
    last_val_step = step;
    val_status = strprintf(" | val %.4f", summary.last_val_loss);
    // After the last step's validation: the test split, once (Megatron's do_test); a stop does not cut it short.
    if (!finish || run.test_evaluation == nullptr || !run.test_evaluation->enabled()) return;
    const EvalResult t = run.test_evaluation->run(backend);
    stop_handlers.eval_took((ms + t.ms) / 1e3);  // the watchdog's grace covers them together
    const EvalMetrics tm = eval_metrics(step, t, /*test=*/true, seconds_since(run.start), tokens);
    record([&] { recorder.eval(tm); });
    summary.test_loss = t.loss;
    progress.line(format_eval_line(tm));
  };

  if (!options.dump_batches_dir.empty()) std::filesystem::create_directories(options.dump_batches_dir);
  log::info(strprintf("training steps %lld to %lld", static_cast<long long>(start_step + 1),
                      static_cast<long long>(train_iters)));
  // Cut short again (a stop, or a failed metrics write): the run ends before its first step, whose save would record
  // no pending evaluation and so lose this one; the checkpoint saved at the end still says it is due.
  bool pending_evaluation_cut = false;
  if (loaded && loaded->eval_pending && evaluation.enabled()) {
    progress.line(
        strprintf("step %lld: the evaluation a stop skipped there, first", static_cast<long long>(start_step)));
    evaluate(start_step, false);
    pending_evaluation_cut = eval_skipped_at == start_step;
  }
  if (pending_evaluation_cut && graph::stop_requested()) {
    summary.stopped_by_signal = true;
    summary.stop_signal = graph::stop_signal();
    progress.line(
        strprintf("stop requested: stopping at step %lld, before its next step (the evaluation there is "
                  "still due)",
                  static_cast<long long>(start_step)));
  }
  int signal_at_end = 0;  // a signal during the last step or its save: the run completes them, and is finished
  for (int64_t step = start_step + 1; !pending_evaluation_cut && step <= train_iters; ++step) {
    const model::HostBatch& host_batch = data.next();
    if (!options.dump_batches_dir.empty()) {
      dump_batch(options.dump_batches_dir, step, host_batch, batch.num_microbatches * batch.micro_batch_size,
                 model.seq_length);
    }
    backend.submit(host_batch);
    submitted = step;
    for (const StepResult& r : backend.collect(1)) handle(r);
    // A stop skips the evaluation (the step still finishes and is saved; the checkpoint says the evaluation is due),
    // except the one after the last step: the run is complete then. Data parallel ranks agree first: one that
    // evaluated alone would wait in the loss reduction for ranks that skipped it.
    if (evaluation.due(step, train_iters)) {
      const bool skip_here = (step != train_iters && graph::stop_requested()) || !metrics_error.empty();
      if (distributed ? distributed->skip_evaluation_everywhere(step, skip_here) : skip_here) {
        eval_skipped_at = step;
      } else {
        evaluate(step, step == train_iters);
      }
    }
    if (save_interval > 0 && step % save_interval == 0) {
      for (const StepResult& r : backend.collect(0)) handle(r);
      save(step);
    }
    // Checked after the periodic save: a signal that arrives during a save ends the run right after
    // it, instead of running one more step and saving again.
    // Data parallel: every rank stops after the same step (one that left would leave the others waiting
    // in a collective), when any rank was asked to.
    const int local_reason = graph::stop_requested()  ? graph::stop_signal()
                             : !metrics_error.empty() ? dist::kStopForOtherReason
                                                      : 0;
    const dist::StopAgreement stop =
        distributed ? distributed->stop_everywhere(step, local_reason) : dist::agree_on_stop({local_reason});
    if (stop.stop && stop.signal != 0 && step == train_iters) {
      signal_at_end = stop.signal;  // every step, the last evaluation and the save are done: nothing was cut short
      progress.line(signal_name(stop.signal) + " arrived during the last step or its save: the run completed them");
      break;
    }
    if (stop.stop) {
      summary.stopped_by_signal = stop.signal != 0;
      summary.stop_signal = stop.signal;
      const std::string why = graph::stop_requested() ? "stop requested"
                              : stop.signal != 0
                                  ? strprintf("rank %d received %s", stop.signal_rank, signal_name(stop.signal).c_str())
                              : metrics_error.empty() ? "another rank stopped"
                                                      : "writing the run records failed";
      progress.line(strprintf("%s: stopping after step %lld", why.c_str(), static_cast<long long>(step)));
      break;
    }
  }
  for (const StepResult& r : backend.collect(0)) handle(r);
  if (metrics_error.empty()) {
    save(summary.steps_done);
  } else if (config.checkpoint.save) {
    try {
      save(summary.steps_done);
    } catch (const Error& e) {
      throw Error(metrics_error + "; the final checkpoint could not be saved either: " + e.what());
    }
  }
  progress.finish();
  for (const auto& line : backend.end_report()) log::info(line);
  const std::string stopped_text =
      metrics_error + (config.checkpoint.save ? strprintf("; the run stopped after saving step %lld",
                                                          static_cast<long long>(summary.steps_done))
                                              : std::string("; the run stopped"));
  try {
    recorder.finish(
        summary.stopped_by_signal
            ? strprintf("stopped by %s after step %lld", signal_name(summary.stop_signal).c_str(),
                        static_cast<long long>(summary.steps_done))
            : strprintf("finished: step %lld of %lld%s", static_cast<long long>(summary.steps_done),
                        static_cast<long long>(train_iters),
                        signal_at_end ? (" (" + signal_name(signal_at_end) + " arrived at the end)").c_str() : ""));
  } catch (const Error& e) {
    // A full disk fails the report too: the metrics error (the cause) leads, the report's follows.
    if (metrics_error.empty()) throw;
    throw Error(stopped_text + "; the report could not be written either: " + e.what());
  }
  log::info("report: " + summary.report_path);
  if (!metrics_error.empty()) throw Error(stopped_text);
  summary.end_note = run_end_note(config, summary);
  if (!summary.stopped_by_signal) return;
  // A stop's last word: the validation loss shown as the run's is not an older step's, and how to go on.
  if (std::isfinite(summary.last_val_loss) && last_val_step != summary.steps_done) {
    log::info(stale_val_loss_note(summary.last_val_loss, last_val_step, eval_skipped_at));
    summary.last_val_loss = NAN;
    summary.val_set_losses.clear();
  }
  log::info(stopped_run_summary(summary.stop_signal, summary.steps_done, train_iters));
}

}  // namespace sg::train
