#include "train/evaluation.h"

#include <algorithm>
#include <chrono>

#include "core/strings.h"
#include "train/data_options.h"

namespace sg::train {

EvalBatching eval_batching(const config::Config& config, const model::BatchSpec& batch) {
  EvalBatching b;
  b.step_sequences = batch.num_microbatches * batch.micro_batch_size;
  b.global_sequences =
      config.validation.eval_global_batch_size.value_or(batch.global_microbatches() * batch.micro_batch_size);
  const int64_t ranks = std::max<int64_t>(1, batch.data_parallel_size);
  SG_CHECK(b.global_sequences > 0 && b.global_sequences % ranks == 0 && b.step_sequences > 0,
           strprintf("validation.eval_global_batch_size = %lld does not divide among %lld data-parallel ranks",
                     static_cast<long long>(b.global_sequences), static_cast<long long>(ranks)));
  b.rank_sequences = b.global_sequences / ranks;
  const int64_t rows = config.validation.eval_iters * b.rank_sequences;
  b.submissions = (rows + b.step_sequences - 1) / b.step_sequences;
  b.padding_rows = b.submissions * b.step_sequences - rows;
  return b;
}

Evaluation::Evaluation(const config::Config& config, const model::ModelSpec& model, const model::BatchSpec& batch,
                       const data::BatchOptions& batch_options, int rank, EvalData data)
    : test_(data == EvalData::test),
      enabled_(evaluation_enabled(config) && (!test_ || has_test_data(config))),
      interval_(config.validation.eval_interval.value_or(0)),
      start_(config.validation.start_eval_at_iter.value_or(0)),
      skip_train_(config.validation.skip_train),
      iters_(config.validation.eval_iters),
      seq_length_(model.seq_length),
      batch_options_(batch_options) {
  if (!enabled()) return;
  batching_ = eval_batching(config, batch);
  rows_ = data::rank_rows(batching_.global_sequences, batch.data_parallel_size, rank);
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
  const auto resize = [this](model::HostBatch& b, int64_t sequences) {
    const auto n = static_cast<size_t>(sequences * seq_length_);
    b.tokens.resize(n);
    b.targets.resize(n);
    b.loss_mask.resize(n);
  };
  resize(rank_rows_, batching_.rank_sequences);
  resize(batch_, batching_.step_sequences);
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
  // The step-shaped batches, when they are not one a validation batch.
  std::string shape;
  if (batching_.submissions != iters_ || batching_.padding_rows > 0) {
    shape = strprintf(", run as %lld batch%s of the training step's %lld sequences a rank",
                      static_cast<long long>(batching_.submissions), batching_.submissions == 1 ? "" : "es",
                      static_cast<long long>(batching_.step_sequences));
    if (batching_.padding_rows > 0) {
      shape +=
          strprintf(" (the last with %lld padding rows, not counted)", static_cast<long long>(batching_.padding_rows));
    }
  }
  std::string text = strprintf(
      "%s: %s, %lld global batch%s of %lld sequences (%lld tokens)%s, forward only, dropout off; the same "
      "batches every time:",
      test_ ? "test" : "validation", when.c_str(), static_cast<long long>(iters_), iters_ == 1 ? "" : "es",
      static_cast<long long>(batching_.global_sequences), static_cast<long long>(tokens_per_evaluation()),
      shape.c_str());
  for (const std::string& line : split(loader_->describe(), '\n')) text += "\n  " + line;
  return text;
}

std::string Evaluation::data_description() const {
  return loader_ ? loader_->describe() : std::string();
}

EvalResult Evaluation::run(TrainingBackend& backend, const std::function<bool()>& stop) {
  const auto start = std::chrono::steady_clock::now();
  loader_->seek(data::DataPosition{0, std::vector<uint64_t>(loader_->num_sources(), 0)});
  const data::HostBatchView view{rank_rows_.tokens.data(), rank_rows_.targets.data(), rank_rows_.loss_mask.data(),
                                 batching_.rank_sequences, seq_length_};
  const auto row_span = [this](int64_t rows) { return static_cast<std::ptrdiff_t>(rows * seq_length_); };
  // Copies `rows` rows from `from` (of rank_rows_) into batch_ at row `at`.
  const auto move_rows = [&](int64_t from, int64_t at, int64_t rows) {
    std::copy_n(rank_rows_.tokens.begin() + row_span(from), row_span(rows), batch_.tokens.begin() + row_span(at));
    std::copy_n(rank_rows_.targets.begin() + row_span(from), row_span(rows), batch_.targets.begin() + row_span(at));
    std::copy_n(rank_rows_.loss_mask.begin() + row_span(from), row_span(rows), batch_.loss_mask.begin() + row_span(at));
  };
  int64_t read = 0;    // validation batches read
  int64_t filled = 0;  // rows of batch_ filled
  for (; read < iters_; ++read) {
    if (read > 0 && stop && stop()) break;
    data::fill_rank_batch(*loader_, view, batching_.global_sequences, rows_, batch_options_);
    for (int64_t row = 0; row < batching_.rank_sequences;) {
      const int64_t rows = std::min(batching_.rank_sequences - row, batching_.step_sequences - filled);
      move_rows(row, filled, rows);
      row += rows;
      filled += rows;
      if (filled == batching_.step_sequences) {
        backend.eval_submit(batch_);
        filled = 0;
      }
    }
  }
  if (read == iters_ && filled > 0) {  // the last, padded: rows the loss does not count
    std::fill(batch_.tokens.begin() + row_span(filled), batch_.tokens.end(), 0);
    std::fill(batch_.targets.begin() + row_span(filled), batch_.targets.end(), 0);
    std::fill(batch_.loss_mask.begin() + row_span(filled), batch_.loss_mask.end(), 0.0f);
    backend.eval_submit(batch_);
  }
  EvalResult r = backend.eval_collect();
  r.batches = read;
  r.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return r;
}

}  // namespace sg::train
