#include "train/evaluation.h"

#include <chrono>

#include "core/strings.h"
#include "train/data_options.h"

namespace sg::train {

Evaluation::Evaluation(const config::Config& config, const model::ModelSpec& model, const model::BatchSpec& batch,
                       const data::BatchOptions& batch_options, int rank, EvalData data)
    : test_(data == EvalData::test),
      enabled_(evaluation_enabled(config) && (!test_ || has_test_data(config))),
      interval_(config.validation.eval_interval.value_or(0)),
      start_(config.validation.start_eval_at_iter.value_or(0)),
      skip_train_(config.validation.skip_train),
      iters_(config.validation.eval_iters),
      sequences_(batch.num_microbatches * batch.micro_batch_size),
      seq_length_(model.seq_length),
      global_sequences_(batch.global_microbatches() * batch.micro_batch_size),
      rows_(data::rank_rows(global_sequences_, batch.data_parallel_size, rank)),
      batch_options_(batch_options) {
  if (!enabled()) return;
  if (!test_) {
    loader_ = std::make_unique<data::DataLoader>(validation_data_options(config, model));
  } else {
    // A test share too small for one sample (a "969,30,1" split of a small corpus) is no test data: skipped, said.
    try {
      loader_ = std::make_unique<data::DataLoader>(test_data_options(config, model));
    } catch (const data::TooFewTokensError& e) {
      enabled_ = false;
      too_small_ = e.what();
      return;
    }
  }
  const auto n = static_cast<size_t>(sequences_ * seq_length_);
  batch_.tokens.resize(n);
  batch_.targets.resize(n);
  batch_.loss_mask.resize(n);
}

Evaluation::~Evaluation() = default;

bool Evaluation::due(int64_t step, int64_t last_step) const {
  return enabled_ && interval_ > 0 && ((step % interval_ == 0 && step >= start_) || step == last_step);
}

std::string Evaluation::describe() const {
  if (!enabled()) {
    if (!too_small_.empty()) return "test: skipped: " + too_small_;
    return test_ ? "test: none (dataset.split gives the test share no documents, or the data is mock)"
                 : "validation: off (validation.eval_interval = null)";
  }
  std::string when;
  if (test_) {
    when = skip_train_ ? "once, after the validation" : "once, after the last step's validation";
  } else if (skip_train_) {
    when = "once, instead of training (validation.skip_train)";
  } else if (start_ > interval_) {
    when = strprintf("every %lld steps from step %lld on and after the last", static_cast<long long>(interval_),
                     static_cast<long long>(start_));
  } else {
    when = strprintf("every %lld steps and after the last", static_cast<long long>(interval_));
  }
  std::string text = strprintf(
      "%s: %s, %lld global batch%s (%lld tokens), forward only, dropout off; the same "
      "batches every time:",
      test_ ? "test" : "validation", when.c_str(), static_cast<long long>(iters_), iters_ == 1 ? "" : "es",
      static_cast<long long>(tokens_per_evaluation()));
  for (const std::string& line : split(loader_->describe(), '\n')) text += "\n  " + line;
  return text;
}

std::string Evaluation::data_description() const {
  return loader_ ? loader_->describe() : std::string();
}

EvalResult Evaluation::run(TrainingBackend& backend, const std::function<bool()>& stop) {
  const auto start = std::chrono::steady_clock::now();
  loader_->seek(data::DataPosition{0, std::vector<uint64_t>(loader_->num_sources(), 0)});
  const data::HostBatchView view{batch_.tokens.data(), batch_.targets.data(), batch_.loss_mask.data(), sequences_,
                                 seq_length_};
  for (int64_t i = 0; i < iters_; ++i) {
    if (i > 0 && stop && stop()) break;  // at least one batch: a backend collects what was submitted
    data::fill_rank_batch(*loader_, view, global_sequences_, rows_, batch_options_);
    backend.eval_submit(batch_);
  }
  EvalResult r = backend.eval_collect();
  r.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return r;
}

}  // namespace sg::train
