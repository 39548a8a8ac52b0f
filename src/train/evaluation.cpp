#include "train/evaluation.h"

#include <algorithm>
#include <chrono>

#include "core/strings.h"
#include "train/data_options.h"

namespace sg::train {

EvalBatching eval_batching(const config::Config& config, const model::BatchSpec& batch, int rank,
                           std::optional<uint64_t> set_samples) {
  EvalBatching b;
  b.step_sequences = batch.num_microbatches * batch.micro_batch_size;
  b.global_sequences =
      config.validation.eval_global_batch_size.value_or(batch.global_microbatches() * batch.micro_batch_size);
  const int64_t ranks = std::max<int64_t>(1, batch.data_parallel_size);
  SG_CHECK(b.global_sequences > 0 && b.global_sequences % ranks == 0 && b.step_sequences > 0,
           strprintf("validation.eval_global_batch_size = %lld does not divide among %lld data-parallel ranks",
                     static_cast<long long>(b.global_sequences), static_cast<long long>(ranks)));
  b.rank_sequences = b.global_sequences / ranks;
  b.batches = config.validation.eval_iters;
  b.last_global_sequences = b.global_sequences;
  if (set_samples) {
    SG_CHECK(*set_samples > 0 && *set_samples <= static_cast<uint64_t>(INT64_MAX / 2),
             strprintf("full validation of %llu samples", static_cast<unsigned long long>(*set_samples)));
    const auto samples = static_cast<int64_t>(*set_samples);
    b.batches = (samples + b.global_sequences - 1) / b.global_sequences;
    b.last_global_sequences = samples - (b.batches - 1) * b.global_sequences;
  }
  // Every rank runs the step-shaped batches of the rank with the most rows (one more of an uneven last batch).
  const int64_t full_rows = (b.batches - 1) * b.rank_sequences;
  const int64_t most_rows = full_rows + (b.last_global_sequences + ranks - 1) / ranks;
  b.rows = full_rows + data::uneven_rank_rows(b.last_global_sequences, ranks, rank).count;
  b.submissions = (most_rows + b.step_sequences - 1) / b.step_sequences;
  b.padding_rows = b.submissions * b.step_sequences - b.rows;
  return b;
}

Evaluation::Evaluation(const config::Config& config, const model::ModelSpec& model, const model::BatchSpec& batch,
                       const data::BatchOptions& batch_options, const DataRank& rank, EvalData data,
                       const config::ValidationSet& set)
    : test_(data == EvalData::test),
      enabled_(evaluation_enabled(config) && (!test_ || has_test_data(config))),
      interval_(config.validation.eval_interval.value_or(0)),
      start_(config.validation.start_eval_at_iter.value_or(0)),
      skip_train_(config.validation.skip_train),
      full_(data == EvalData::validation && config.validation.full_validation),
      set_name_(set.name),
      rank_(rank.rank),
      ranks_(std::max<int64_t>(1, batch.data_parallel_size)),
      seq_length_(model.seq_length),
      batch_options_(batch_options) {
  if (!enabled()) return;
  std::optional<uint64_t> set_samples;
  if (!test_) {
    const data::DataLoaderOptions options = validation_data_options(config, model, set.prefix, rank.scan_share);
    loader_ = std::make_unique<data::DataLoader>(options);
    if (full_) set_samples = data::samples_per_epoch(options);  // validate refused what has no whole set
  } else {
    // A test share too small for one sample (a "969,30,1" split of a small corpus) is no test data: skipped, said.
    try {
      loader_ = std::make_unique<data::DataLoader>(test_data_options(config, model, rank.scan_share));
    } catch (const data::TooFewTokensError& e) {
      enabled_ = false;
      too_small_ = e.what();
      return;
    }
  }
  batching_ = eval_batching(config, batch, rank.rank, set_samples);
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
  const EvalBatching& b = batching_;
  std::string batches = strprintf("%lld global batch%s of %lld sequences", static_cast<long long>(b.batches),
                                  b.batches == 1 ? "" : "es", static_cast<long long>(b.global_sequences));
  if (full_) {
    batches = strprintf("the whole set (validation.full_validation), %lld samples in %s",
                        static_cast<long long>((b.batches - 1) * b.global_sequences + b.last_global_sequences),
                        batches.c_str());
    if (b.last_global_sequences != b.global_sequences) {
      batches += strprintf(" (the last of %lld)", static_cast<long long>(b.last_global_sequences));
    }
  }
  // The step-shaped batches, when they are not one a validation batch.
  if (b.submissions != b.batches || b.padding_rows > 0) {
    batches += strprintf(", run as %lld batch%s of the training step's %lld sequences a rank",
                         static_cast<long long>(b.submissions), b.submissions == 1 ? "" : "es",
                         static_cast<long long>(b.step_sequences));
    if (b.padding_rows > 0) {
      batches += strprintf(" (%lld padding rows at the end, not counted)", static_cast<long long>(b.padding_rows));
    }
  }
  const std::string what = test_ ? "test" : set_name_.empty() ? "validation" : "validation set " + set_name_;
  std::string text =
      strprintf("%s: %s, %s (%lld tokens), forward only, dropout off; the same batches every time:", what.c_str(),
                when.c_str(), batches.c_str(), static_cast<long long>(tokens_per_evaluation()));
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
  const EvalBatching& b = batching_;
  const data::RankRows full_rows = data::rank_rows(b.global_sequences, ranks_, rank_);
  int64_t read = 0;       // validation batches read
  int64_t filled = 0;     // rows of batch_ filled
  int64_t submitted = 0;  // step-shaped batches
  const auto submit = [&] {
    backend.eval_submit(batch_);
    ++submitted;
    filled = 0;
  };
  for (; read < b.batches; ++read) {
    if (read > 0 && stop && stop()) break;
    // The last batch of a full validation holds what the set has left, which the ranks may not share evenly.
    const bool last = read == b.batches - 1;
    const data::RankRows rows = last ? data::uneven_rank_rows(b.last_global_sequences, ranks_, rank_) : full_rows;
    const int64_t sequences = last ? b.last_global_sequences : b.global_sequences;
    if (rows.count == 0) {  // none of its rows are this rank's (fewer than the ranks)
      for (int64_t i = 0; i < sequences; ++i) loader_->skip();
    } else {
      data::HostBatchView part = view;
      part.num_sequences = rows.count;
      data::fill_rank_batch(*loader_, part, sequences, rows, batch_options_);
    }
    for (int64_t row = 0; row < rows.count;) {
      const int64_t n = std::min(rows.count - row, b.step_sequences - filled);
      move_rows(row, filled, n);
      row += n;
      filled += n;
      if (filled == b.step_sequences) submit();
    }
  }
  // Padding, rows the loss does not count, up to the batches every rank runs (their loss reductions are collective).
  while (read == b.batches && submitted < b.submissions) {
    std::fill(batch_.tokens.begin() + row_span(filled), batch_.tokens.end(), 0);
    std::fill(batch_.targets.begin() + row_span(filled), batch_.targets.end(), 0);
    std::fill(batch_.loss_mask.begin() + row_span(filled), batch_.loss_mask.end(), 0.0f);
    submit();
  }
  EvalResult r = backend.eval_collect();
  r.batches = read;
  r.ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return r;
}

}  // namespace sg::train
