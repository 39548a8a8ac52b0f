#include "train/trainer.h"

#include <filesystem>
#include <memory>
#include <optional>

#include "core/error.h"
#include "core/log.h"
#include "core/strings.h"
#include "graph/registry.h"
#include "train/backend_factory.h"
#include "train/distributed_run.h"
#include "checkpoint/safetensors.h"
#include "train/checkpointing.h"
#include "data/batch.h"
#include "data/blended_dataset.h"
#include "data/rank_batch.h"
#include "train/metrics.h"
#include "config/model_config.h"
#include "train/progress.h"
#include "config/validate.h"

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
  // `rank`: this data-parallel rank, which reads its rows of every global batch (data/rank_batch.h).
  BatchSource(const config::Config& config, const model::ModelSpec& model, const model::BatchSpec& batch, int rank)
      : loader_(make_options(config, model)), model_(model), batch_(batch),
        global_sequences_(batch.global_microbatches() * batch.micro_batch_size),
        rows_(data::rank_rows(global_sequences_, batch.data_parallel_size, rank)) {
    const size_t n = static_cast<size_t>(batch.num_microbatches * batch.tokens_per_microbatch(model));
    host_.tokens.resize(n);
    host_.targets.resize(n);
    host_.loss_mask.resize(n);
  }
  const model::HostBatch& next() {
    data::HostBatchView view{host_.tokens.data(), host_.targets.data(), host_.loss_mask.data(),
                             batch_.num_microbatches * batch_.micro_batch_size, model_.seq_length};
    data::fill_rank_batch(loader_, view, global_sequences_, rows_);
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
    return o;
  }
  data::DataLoader loader_;
  model::ModelSpec model_;
  model::BatchSpec batch_;
  int64_t global_sequences_;
  data::RankRows rows_;
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
  DistributedRun* const distributed = options.distributed;
  const int world_size = distributed ? distributed->world_size() : 1;
  SG_CHECK(batch.data_parallel_size == world_size,
           strprintf("the config's data_parallel_size %lld differs from the %d rank(s) running",
                     static_cast<long long>(batch.data_parallel_size), world_size));
  const bool writer = distributed == nullptr || distributed->is_writer();
  // Every rank stops after the same step (a rank that left would leave the others waiting in a collective).
  const auto stop_after = [distributed](int64_t step) {
    return distributed ? distributed->stop_everywhere(step, graph::stop_requested()) : graph::stop_requested();
  };
  const int64_t train_iters = config.train.train_iters.value_or(0);
  SG_CHECK(train_iters > 0, "train.train_iters must be set to a positive number of steps");

  // Data and checkpoint are checked before any device memory is planned: bad input fails fast.
  BatchSource data(config, model, batch, distributed ? distributed->rank() : 0);
  log::info(data.loader().describe());
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

  std::filesystem::create_directories(options.run_dir);
  std::unique_ptr<TrainingBackend> backend = make_backend(config, options.force_cpu, distributed);
  log::info(backend->description());
  log::info(backend->memory_plan());
  for (const auto& line : backend->start_report()) log::info(line);
  if (loaded) {
    backend->load_state(loaded->state);
    data.loader().seek(loaded->position);
    log::info(strprintf("resumed from %s at step %lld", loaded->path.c_str(), static_cast<long long>(start_step)));
  }

  MetricsLog metrics((std::filesystem::path(options.run_dir) / "metrics.jsonl").string(), /*append=*/loaded.has_value());
  summary.metrics_path = metrics.path();
  const double flops = training_flops_per_step(model, batch);
  const double peak = peak_bf16_tflops(backend->device_name());
  // Tokens of the whole global batch (every rank's): tok/s is the run's; TFLOP/s and MFU stay per GPU.
  const double tokens =
      static_cast<double>(batch.global_microbatches() * batch.tokens_per_microbatch(model));
  const int64_t log_interval = std::max<int64_t>(1, config.logger.log_interval);
  const int64_t save_interval = config.checkpoint.save_interval.value_or(0);

  Progress progress("train", train_iters, options.interactive);
  backend->notify = [&progress](const std::string& text) { progress.line(text); };

  // A checkpoint is taken only after collect(0): every submitted step is finished, so the loader's
  // position is exactly the data the saved state has consumed.
  bool have_first = false;
  int64_t last_saved = -1;

  auto save = [&](int64_t step) {
    if (!config.checkpoint.save || step == last_saved) return;
    TrainingState state = backend->state();  // every rank: the sharded state is gathered collectively
    if (!writer) {                            // rank 0 writes the one checkpoint of the run
      last_saved = step;
      return;
    }
    const data::DataPosition& position = data.loader().position();
    const std::string dir = save_checkpoint(*config.checkpoint.save, config, backend->layout(), state, position);
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
    const StepMetrics m = to_metrics(r, flops, peak, tokens, backend->device_memory_used());
    metrics.write(m);
    if (r.capture_step) {
      progress.line(strprintf("step %lld captured the CUDA graphs (%.1f ms including capture; not in the averages)",
                              static_cast<long long>(r.step), r.step_ms));
    }
    if (r.step % log_interval == 0 || r.step == train_iters) {
      progress.line(strprintf("step %6lld/%lld | loss %.4f | grad norm %.3f | lr %.3e | %.2f ms | "
                              "%.0f tok/s | %.1f TFLOP/s | MFU %.1f%% | mem %s",
                              static_cast<long long>(r.step), static_cast<long long>(train_iters), m.loss,
                              m.grad_norm, m.lr, m.step_ms, m.tokens_per_s, m.tflops_per_gpu, m.mfu * 100,
                              human_bytes(m.device_memory_used).c_str()));
    }
    progress.update(r.step, strprintf("loss %.4f", r.loss));
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
    if (stop_after(step)) {
      summary.stopped_by_signal = true;
      progress.line(strprintf("stop requested: finishing step %lld", static_cast<long long>(step)));
      break;
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
  return summary;
}

}  // namespace sg::train
