#include "train/trainer.h"

#include <chrono>
#include <cmath>
#include <filesystem>
#include <memory>
#include <optional>

#include "core/error.h"
#include "core/log.h"
#include "core/strings.h"
#include "graph/registry.h"
#include "train/backend_factory.h"
#include "checkpoint/safetensors.h"
#include "train/checkpointing.h"
#include "data/batch.h"
#include "data/blended_dataset.h"
#include "train/metrics.h"
#include "config/model_config.h"
#include "train/progress.h"
#include "config/tokenizer_vocab.h"
#include "config/validate.h"
#include "train/evaluation.h"
#include "train/progress_lines.h"
#include "train/run_plan.h"
#include "train/run_recorder.h"

namespace sg::train {
namespace {

std::string violations_text(const config::ValidationReport& report) {
  std::string text = strprintf("the configuration breaks %zu rule(s); nothing was run:\n",
                               report.violations.size());
  for (const auto& v : report.violations) text += config::format_violation(v);
  return text;
}

// Owns the host side of the input pipeline: the loader and the batch it fills.
class BatchSource {
 public:
  BatchSource(const config::Config& config, const model::ModelSpec& model, const model::BatchSpec& batch,
              const data::BatchOptions& options)
      : loader_(make_options(config, model)), model_(model), batch_(batch), options_(options) {
    const size_t n = static_cast<size_t>(batch.num_microbatches * batch.tokens_per_microbatch(model));
    host_.tokens.resize(n);
    host_.targets.resize(n);
    host_.loss_mask.resize(n);
  }
  const model::HostBatch& next() {
    data::HostBatchView view{host_.tokens.data(), host_.targets.data(), host_.loss_mask.data(),
                             batch_.num_microbatches * batch_.micro_batch_size, model_.seq_length};
    data::fill_batch(loader_, view, options_);
    return host_;
  }
  data::DataLoader& loader() { return loader_; }

 private:
  static data::DataLoaderOptions make_options(const config::Config& config, const model::ModelSpec& model) {
    data::DataLoaderOptions o;
    o.data_path = config.dataset.data_path;
    o.mock = config.dataset.mock;
    o.seq_length = model.seq_length;
    o.vocab_size = model.vocab_size;
    o.seed = static_cast<uint64_t>(config.rng.seed);
    if (config.dataset.split && !config.dataset.mock) {
      o.split_shares = data::parse_split(*config.dataset.split);
      o.split = data::Split::train;
    }
    return o;
  }
  data::DataLoader loader_;
  model::ModelSpec model_;
  model::BatchSpec batch_;
  data::BatchOptions options_;
  model::HostBatch host_;
};

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

// SIGINT/SIGTERM handling for the duration of a run, on every way out.
struct StopHandlers {
  explicit StopHandlers(double grace_seconds) { graph::install_stop_handlers(grace_seconds); }
  ~StopHandlers() { graph::uninstall_stop_handlers(); }
  StopHandlers(const StopHandlers&) = delete;
  StopHandlers& operator=(const StopHandlers&) = delete;
};

StepMetrics to_metrics(const StepResult& r, double flops, double peak_tflops, double tokens,
                       uint64_t memory_used) {
  StepMetrics m;
  m.capture = r.capture_step;
  m.tokens = static_cast<int64_t>(tokens) * r.step;
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

TrainSummary train(const config::Config& raw_config, const TrainOptions& options) {
  const config::ValidationReport report = config::validate(raw_config);
  if (!report.ok()) throw Error(violations_text(report));
  const config::Config& config = report.config;
  if (const auto missing = config::unimplemented_features(config); !missing.empty()) {
    throw Error("stepgraph train does not implement yet: " + join(missing, "; ") +
                ". Remove these settings (stepgraph validate lists them as notes).");
  }
  const model::ModelSpec model = config::model_spec(config);
  const model::BatchSpec batch = config::batch_spec(config);
  const int64_t train_iters = config.train.train_iters.value_or(0);
  SG_CHECK(train_iters > 0, "train.train_iters must be set to a positive number of steps");

  // Tokenizer, data and checkpoint are checked before any device memory is planned: bad input fails fast.
  const auto run_start = std::chrono::steady_clock::now();
  const std::optional<data::HfTokenizerInfo> tokenizer = config::load_tokenizer(config);
  data::BatchOptions batch_options;
  batch_options.eod_mask_loss = config.dataset.eod_mask_loss;
  if (tokenizer) batch_options.eod_token = tokenizer->eod_id;
  if (batch_options.eod_mask_loss && batch_options.eod_token < 0) {
    throw Error("dataset.eod_mask_loss: the tokenizer in " + (tokenizer ? tokenizer->dir : std::string("(none)")) +
                " names no eos_token (tokenizer_config.json), so there is no EOD id to mask; set "
                "dataset.eod_mask_loss=false or use a tokenizer with an eos token");
  }
  BatchSource data(config, model, batch, batch_options);
  Evaluation evaluation(config, model, batch, batch_options);
  std::optional<LoadedCheckpoint> loaded;
  if (config.checkpoint.load) loaded = load_checkpoint(*config.checkpoint.load, config, model::ParamLayout(model));

  TrainSummary summary;
  const int64_t start_step = loaded ? loaded->state.steps_done : 0;
  summary.steps_done = start_step;
  if (start_step >= train_iters) {
    log::info(strprintf("%s is at step %lld and train.train_iters = %lld: nothing to train",
                        loaded->path.c_str(), static_cast<long long>(start_step), static_cast<long long>(train_iters)));
    return summary;
  }

  // What will run, before the (slow) device setup.
  log::info(describe_model(config));
  log::info(describe_batch(config));
  if (tokenizer) {
    log::info(strprintf("tokenizer: %s; model.vocab_size %lld", tokenizer->describe().c_str(),
                        static_cast<long long>(model.vocab_size)));
  }
  log::info("data: " + data.loader().describe());
  log::info(evaluation.describe());

  std::filesystem::create_directories(options.run_dir);
  std::unique_ptr<TrainingBackend> backend = make_backend(config, options.force_cpu);
  const bool gpu = backend->on_gpu();
  log::info(backend->description());
  std::vector<std::string> plan_lines = {describe_model(config), describe_batch(config)};
  if (gpu) {
    plan_lines.push_back("GPU memory plan (the arena, as allocated):\n" + backend->memory_plan());
    for (const auto& line : backend->start_report()) plan_lines.push_back(line);
  } else {
    plan_lines.push_back(backend->memory_plan());
    plan_lines.push_back("on a GPU: " + describe_gpu_memory_plan(config));
    plan_lines.push_back("on a GPU: " + describe_graph_plan(config) + "; the CPU backend runs every step eagerly");
  }
  for (size_t i = 2; i < plan_lines.size(); ++i) log::info(plan_lines[i]);
  if (loaded) {
    backend->load_state(loaded->state);
    data.loader().seek(loaded->position);
    log::info(strprintf("resumed from %s at step %lld", loaded->path.c_str(), static_cast<long long>(start_step)));
  }

  const double flops = training_flops_per_step(model, batch);
  const double peak = peak_bf16_tflops(backend->device_name());
  const double tokens = static_cast<double>(batch.num_microbatches * batch.tokens_per_microbatch(model));
  RunReportInfo run_report;
  run_report.title = "stepgraph run: " + std::filesystem::path(options.run_dir).filename().string();
  run_report.gpu = gpu;
  run_report.plan = plan_lines;
  run_report.facts = {{"backend", backend->description()},
                  {"run folder", options.run_dir},
                  {"tokens per step", thousands(static_cast<int64_t>(tokens))},
                  {"FLOPs per step", strprintf("%.4g", flops)}};
  if (tokenizer) run_report.facts.emplace_back("tokenizer", tokenizer->describe());
  if (config.checkpoint.save) run_report.facts.emplace_back("checkpoints", *config.checkpoint.save);
  RunRecorder recorder(config, options.run_dir, /*resumed=*/loaded.has_value(), run_report);
  summary.metrics_path = recorder.metrics_path();
  summary.report_path = recorder.report_path();
  if (!recorder.tensorboard_path().empty()) log::info("TensorBoard events: " + recorder.tensorboard_path());
  const int64_t log_interval = std::max<int64_t>(1, config.logger.log_interval);
  const int64_t save_interval = config.checkpoint.save_interval.value_or(0);
  std::vector<std::string> tokenizer_files;
  if (tokenizer) tokenizer_files = tokenizer->files;

  Progress progress("train", train_iters, options.interactive);
  backend->notify = [&progress](const std::string& text) { progress.line(text); };
  const auto seconds_since_start = [&run_start] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - run_start).count();
  };

  // A checkpoint is taken only after collect(0): every submitted step is finished, so the loader's
  // position is exactly the data the saved state has consumed.
  bool have_first = false;
  int64_t last_saved = -1;
  std::string val_status;

  auto save = [&](int64_t step) {
    if (!config.checkpoint.save || step == last_saved) return;
    TrainingState state = backend->state();
    const data::DataPosition& position = data.loader().position();
    const std::string dir =
        save_checkpoint(*config.checkpoint.save, config, backend->layout(), state, position, tokenizer_files);
    progress.line(strprintf("saved checkpoint %s", dir.c_str()));
    last_saved = step;
  };

  auto handle = [&](const StepResult& r) {
    if (!have_first) {
      summary.first_loss = r.loss;
      have_first = true;
    }
    summary.last_loss = r.loss;
    summary.steps_done = r.step;
    if (config.rerun_state_machine.check_for_nan_in_loss && !r.loss_finite) {
      throw Error(strprintf("step %lld: the loss is NaN or infinite (rerun_state_machine.check_for_nan_in_loss); "
                            "the run stopped. Lower optimizer.lr or check the data.",
                            static_cast<long long>(r.step)));
    }
    if (config.ddp.check_for_nan_in_grad && !r.grads_finite) {
      throw Error(strprintf("step %lld: a gradient is NaN or infinite (ddp.check_for_nan_in_grad); "
                            "the run stopped. Lower optimizer.lr or check the data.",
                            static_cast<long long>(r.step)));
    }
    StepMetrics m = to_metrics(r, flops, peak, tokens, backend->device_memory_used());
    m.wall_time_s = seconds_since_start();
    recorder.step(m);
    if (r.capture_step) {
      progress.line(strprintf("step %lld captured the CUDA graphs (%.1f ms including capture; not in the averages)",
                              static_cast<long long>(r.step), r.step_ms));
    }
    if (r.step % log_interval == 0 || r.step == train_iters) {
      progress.line(format_step_line(m, train_iters, gpu, peak > 0));
    }
    progress.update(r.step, strprintf("loss %.4f", r.loss) + val_status);
  };

  auto evaluate = [&](int64_t step) {
    for (const StepResult& r : backend->collect(0)) handle(r);
    const EvalResult e = evaluation.run(*backend);
    EvalMetrics m;
    m.step = step;
    m.val_loss = e.loss;
    m.val_ppl = std::exp(e.loss);
    m.batches = e.batches;
    m.ms = e.ms;
    m.wall_time_s = seconds_since_start();
    m.tokens = static_cast<int64_t>(tokens) * step;
    recorder.eval(m);
    summary.last_val_loss = e.loss;
    val_status = strprintf(" | val %.4f", e.loss);
    if (e.captured) progress.line(strprintf("step %lld: captured the evaluation graph", static_cast<long long>(step)));
    progress.line(format_eval_line(m));
  };

  // A stop finishes the current step and saves: the watchdog's grace covers a checkpoint write.
  const StopHandlers stop_handlers(config.checkpoint.save ? 120.0 : 1.5);
  if (!options.dump_batches_dir.empty()) std::filesystem::create_directories(options.dump_batches_dir);
  for (int64_t step = start_step + 1; step <= train_iters; ++step) {
    const model::HostBatch& host_batch = data.next();
    if (!options.dump_batches_dir.empty()) {
      dump_batch(options.dump_batches_dir, step, host_batch, batch.num_microbatches * batch.micro_batch_size,
                 model.seq_length);
    }
    backend->submit(host_batch);
    for (const StepResult& r : backend->collect(1)) handle(r);
    if (graph::stop_requested()) {
      summary.stopped_by_signal = true;
      progress.line(strprintf("stop requested: finishing step %lld", static_cast<long long>(step)));
      break;
    }
    if (evaluation.due(step, train_iters)) {
      evaluate(step);
    }
    if (save_interval > 0 && step % save_interval == 0) {
      for (const StepResult& r : backend->collect(0)) handle(r);
      save(step);
    }
  }
  for (const StepResult& r : backend->collect(0)) handle(r);
  save(summary.steps_done);
  progress.finish();
  for (const auto& line : backend->end_report()) log::info(line);
  recorder.finish(summary.stopped_by_signal
                      ? strprintf("stopped by signal %d after step %lld", graph::stop_signal(),
                                  static_cast<long long>(summary.steps_done))
                      : strprintf("finished: step %lld of %lld", static_cast<long long>(summary.steps_done),
                                  static_cast<long long>(train_iters)));
  log::info("report: " + summary.report_path);
  return summary;
}

}  // namespace sg::train
