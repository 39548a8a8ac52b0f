#pragma once
// Evaluation on validation data (the validation section: eval_interval, eval_iters, start_eval_at_iter, skip_train),
// as Megatron's evaluate():
// every eval_interval steps (and after the last step) eval_iters global batches of validation data (of
// validation.eval_global_batch_size sequences) go through the backend's forward-only path (dropout off, no backward,
// no optimizer, no RNG advance), and the mean loss over their loss tokens is the validation loss (Bridge's
// evaluate(): summed token losses over the token count); val_ppl = exp(val_loss).
//
// Test data: dataset.split's third share of dataset.data_path, read once after the last step's validation (and after
// a skip_train validation) when evaluation is on (EvalData::test).
//
// Validation data: the valid split of dataset.data_path (dataset.split, Megatron's document-level
// split of every dataset of the blend), or dataset.valid_data_path, or mock samples with another seed
// (dataset.mock). Every evaluation reads the SAME first eval_iters global batches of that stream (it is
// rewound each time), so successive validation losses compare the model on the same text, and resuming
// needs no validation position in the checkpoint. (Megatron-LM continues its validation iterator
// instead; with a fixed set the curve is not noisier than the model.)
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "config/config.h"
#include "config/validation_sets.h"
#include "data/batch.h"
#include "data/blended_dataset.h"
#include "data/rank_batch.h"
#include "model/batch.h"
#include "model/spec.h"
#include "train/backend.h"
#include "train/data_options.h"

namespace sg::train {

// Whether a run of `config` evaluates: validation.eval_interval set (validate refuses values below 1), or
// validation.skip_train (one evaluation instead of training). The one decision, which the trainer's Evaluation, the
// GPU backend's evaluation graph and the run plan follow.
inline bool evaluation_enabled(const config::Config& config) {
  return config.validation.eval_interval.value_or(0) > 0 || config.validation.skip_train;
}

// Which data an Evaluation reads: the validation data, or dataset.split's test share (evaluated once, after the last
// step or the skip_train validation, as Megatron's do_test).
enum class EvalData { validation, test };

// How one evaluation's rows meet the step. Bridge reads eval_iters batches of validation.eval_global_batch_size
// sequences, each cut among the ranks as a training batch is (data/rank_batch.h); with validation.full_validation
// (Megatron-LM's), as many as the validation set fills, every sample once, the last batch holding what is left
// (cut among the ranks as evenly as it goes). A rank's rows, in order, fill batches of the training step's shape (its
// compiled shapes and graphs: no second plan and no memory for one), then rows of loss mask 0, which the loss does
// not count, pad them to the same number of batches on every rank. validation.eval_micro_batch_size sets only
// Bridge's divisibility rule: the loss is a token mean over the whole evaluation, whatever the microbatches.
struct EvalBatching {
  int64_t batches = 0;                // validation batches one evaluation reads (validation.eval_iters, or the set's)
  int64_t global_sequences = 0;       // validation.eval_global_batch_size (train.global_batch_size when null)
  int64_t last_global_sequences = 0;  // of the last batch: global_sequences, or what the whole set leaves
  int64_t rank_sequences = 0;         // this rank's rows of each full batch: global_sequences / data_parallel_size
  int64_t step_sequences = 0;         // rows of one step-shaped batch on a rank: num_microbatches x micro_batch_size
  int64_t rows = 0;                   // this rank's rows of one evaluation
  int64_t submissions = 0;            // step-shaped batches one evaluation runs, the same on every rank
  int64_t padding_rows = 0;           // this rank's rows of loss mask 0: submissions x step_sequences - rows
};
// `config` validated (validate refuses an evaluation batch the ranks cannot share). `set_samples`: with
// full_validation, the samples of the whole validation set (data::samples_per_epoch); nullopt otherwise.
EvalBatching eval_batching(const config::Config& config, const model::BatchSpec& batch, int rank = 0,
                           std::optional<uint64_t> set_samples = std::nullopt);

class Evaluation {
 public:
  // `config` validated. Opens the validation datasets only when evaluation is on. `rank`: this
  // data-parallel rank, which evaluates its rows of every validation batch (data/rank_batch.h; the backend sums the
  // ranks' losses), and its share of each corpus's scan.
  // `set`: with validation.multiple_validation_sets, the one validation dataset it evaluates (its name labels its
  // records); the default, all the validation data.
  Evaluation(const config::Config& config, const model::ModelSpec& model, const model::BatchSpec& batch,
             const data::BatchOptions& batch_options, const DataRank& rank = {}, EvalData data = EvalData::validation,
             const config::ValidationSet& set = {});
  ~Evaluation();

  // Validation: evaluation_enabled(config). Test: that, and test data (has_test_data) of at least one sample.
  bool enabled() const { return enabled_; }
  // A test evaluation skipped because its share holds no sample (the loader's words); "" otherwise.
  const std::string& skipped_because() const { return too_small_; }
  // The validation set's name (multiple_validation_sets); "" for all the validation data, and for the test data.
  const std::string& set_name() const { return set_name_; }
  // Validation batches one evaluation reads (validation.eval_iters, or with full_validation the set's).
  int64_t iters() const { return batching_.batches; }
  const EvalBatching& batching() const { return batching_; }
  // Tokens one evaluation reads (every rank's).
  int64_t tokens_per_evaluation() const {
    return ((batching_.batches - 1) * batching_.global_sequences + batching_.last_global_sequences) * seq_length_;
  }
  // The validation datasets (or mock source), as the loader describes them; "" when evaluation is off.
  std::string data_description() const;
  // After step `step` of `last_step`: every interval steps from validation.start_eval_at_iter on, and after the last
  // one (as Megatron's final evaluation, whatever start_eval_at_iter says). Never without validation.eval_interval.
  bool due(int64_t step, int64_t last_step) const;
  // "every 50 steps and after the last: 4 global batches (4096 tokens) from <source>"
  std::string describe() const;

  // One evaluation: rewinds the validation stream, reads eval_iters batches, submits them as batching().submissions
  // step-shaped batches, collects; the result counts the validation batches read. The backend's training steps must
  // all be collected first. When `stop` returns true between batches the evaluation ends early (a signal asked the
  // run to stop): the result then counts fewer batches.
  EvalResult run(TrainingBackend& backend, const std::function<bool()>& stop = {});

 private:
  bool test_ = false;  // EvalData::test
  std::string too_small_;  // the test share holds no sample: why it is skipped
  bool enabled_ = false;
  int64_t interval_ = 0;  // 0: no evaluation during training (validation.skip_train alone)
  int64_t start_ = 0;     // validation.start_eval_at_iter
  bool skip_train_ = false;
  bool full_ = false;             // validation.full_validation (never the test data)
  std::string set_name_;
  int64_t rank_ = 0, ranks_ = 1;  // this data-parallel rank, of ranks_
  int64_t seq_length_ = 0;
  EvalBatching batching_;
  data::BatchOptions batch_options_;
  std::unique_ptr<data::DataLoader> loader_;
  model::HostBatch rank_rows_;  // this rank's rows of one validation batch, as read
  model::HostBatch batch_;      // the step-shaped batch they fill
};

}  // namespace sg::train
