// An evaluation batch other than the training one (validation.eval_global_batch_size, eval_micro_batch_size): the
// evaluation reads eval_iters batches of eval_global_batch_size sequences, a rank's rows fill batches of the training
// step's shape in order, the last padded with rows of loss mask 0, and the validation loss is the mean over the
// evaluated tokens (Bridge's evaluate()), which the padding does not change and which weighs every token alike.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "config/config.h"
#include "config/model_config.h"
#include "data/indexed_dataset.h"
#include "model/cpu_model.h"
#include "test_dir.h"
#include "train/backend.h"
#include "train/backend_factory.h"
#include "train/cpu_backend.h"
#include "train/data_options.h"
#include "train/evaluation.h"
#include "train/mock_training.h"
#include "train/recording_backend.h"

namespace sg::train {
namespace {

using test::RecordingBackend;

// llama/tiny trains global batches of 8 sequences in microbatches of 4; the evaluation reads batches of 6 in
// microbatches of 2 (Bridge's rule allows it), 3 of them: 18 rows.
const std::vector<std::string> kSixes = {
    "dataset.mock=true",       "train.global_batch_size=8",           "train.eval_interval=1",
    "validation.eval_iters=3", "validation.eval_global_batch_size=6", "validation.eval_micro_batch_size=2"};

// Shorter sequences and two layers keep the CPU twin's evaluations quick.
config::Config tiny(std::vector<std::string> overrides, int ranks) {
  overrides.insert(overrides.end(), {"model.seq_length=64", "dataset.seq_length=64", "model.num_layers=2"});
  config::Config config = test::validated_tiny(overrides);
  config.data_parallel_size = ranks;
  return config;
}

struct Recorded {
  std::vector<model::HostBatch> batches;
  EvalBatching batching;
};

Recorded recorded(const config::Config& config, int rank) {
  const model::ModelSpec model = config::model_spec(config);
  const model::BatchSpec batch = config::batch_spec(config);
  Evaluation evaluation(config, model, batch, {}, {.rank = rank, .scan_share = {}});
  RecordingBackend backend;
  const EvalResult r = evaluation.run(backend);
  // Validation batches (eval_iters, or the whole set's), not step-shaped ones.
  EXPECT_EQ(r.batches, config.validation.full_validation ? evaluation.iters() : config.validation.eval_iters);
  EXPECT_EQ(static_cast<int64_t>(backend.batches.size()), evaluation.batching().submissions);
  return {backend.batches, evaluation.batching()};
}

// Row `row` of the concatenated submissions of `per` rows each.
std::vector<int32_t> tokens_of(const std::vector<model::HostBatch>& batches, size_t row, size_t seq, size_t per) {
  const model::HostBatch& b = batches.at(row / per);
  const auto at = static_cast<std::ptrdiff_t>((row % per) * seq);
  return {b.tokens.begin() + at, b.tokens.begin() + at + static_cast<std::ptrdiff_t>(seq)};
}

std::vector<float> mask_of(const std::vector<model::HostBatch>& batches, size_t row, size_t seq, size_t per) {
  const model::HostBatch& b = batches.at(row / per);
  const auto at = static_cast<std::ptrdiff_t>((row % per) * seq);
  return {b.loss_mask.begin() + at, b.loss_mask.begin() + at + static_cast<std::ptrdiff_t>(seq)};
}

TEST(EvaluationBatching, ValidationRowsFillTheStepShapeInOrderAndTheLastIsPadded) {
  const config::Config six = tiny(kSixes, 1);
  const size_t seq = static_cast<size_t>(config::model_spec(six).seq_length);
  const Recorded got = recorded(six, 0);
  EXPECT_EQ(got.batching.global_sequences, 6);
  EXPECT_EQ(got.batching.step_sequences, 8);
  EXPECT_EQ(got.batching.submissions, 3);  // 18 rows: 8, 8, and 2 + 6 padding
  EXPECT_EQ(got.batching.padding_rows, 6);
  ASSERT_EQ(got.batches.size(), 3u);
  // The training's batch (8 sequences, the same validation stream): its first 18 rows are the ones evaluated.
  const Recorded whole = recorded(
      tiny({"dataset.mock=true", "train.global_batch_size=8", "train.eval_interval=1", "validation.eval_iters=3"}, 1),
      0);
  ASSERT_EQ(whole.batches.size(), 3u);
  EXPECT_EQ(whole.batching.padding_rows, 0);
  for (size_t row = 0; row < 18; ++row) {
    SCOPED_TRACE(testing::Message() << "row " << row);
    EXPECT_EQ(tokens_of(got.batches, row, seq, 8), tokens_of(whole.batches, row, seq, 8));
    EXPECT_EQ(mask_of(got.batches, row, seq, 8), std::vector<float>(seq, 1.0f));
  }
  for (size_t row = 18; row < 24; ++row) {
    EXPECT_EQ(mask_of(got.batches, row, seq, 8), std::vector<float>(seq, 0.0f)) << "padding row " << row;
    EXPECT_EQ(tokens_of(got.batches, row, seq, 8), std::vector<int32_t>(seq, 0)) << "padding row " << row;
  }
}

TEST(EvaluationBatching, RanksTogetherEvaluateTheSingleProcessRows) {
  const config::Config one = tiny(kSixes, 1);
  const size_t seq = static_cast<size_t>(config::model_spec(one).seq_length);
  const Recorded whole = recorded(one, 0);
  for (int rank = 0; rank < 2; ++rank) {
    SCOPED_TRACE(testing::Message() << "rank " << rank);
    // 2 ranks: 3 rows of each validation batch of 6, in a step of 4 rows a rank: 9 rows, the last batch 1 + 3 padding.
    const Recorded mine = recorded(tiny(kSixes, 2), rank);
    EXPECT_EQ(mine.batching.rank_sequences, 3);
    EXPECT_EQ(mine.batching.step_sequences, 4);
    EXPECT_EQ(mine.batching.submissions, 3);
    EXPECT_EQ(mine.batching.padding_rows, 3);
    ASSERT_EQ(mine.batches.size(), 3u);
    for (size_t i = 0; i < 9; ++i) {
      // Row i of this rank: validation batch i / 3, that batch's row 3 rank + i % 3.
      const size_t single = (i / 3) * 6 + static_cast<size_t>(rank) * 3 + i % 3;
      EXPECT_EQ(tokens_of(mine.batches, i, seq, 4), tokens_of(whole.batches, single, seq, 8)) << "row " << i;
    }
    for (size_t i = 9; i < 12; ++i) EXPECT_EQ(mask_of(mine.batches, i, seq, 4), std::vector<float>(seq, 0.0f));
  }
}

// The CPU backend's validation loss for the 18 rows (end-of-document tokens masked, so rows count different numbers
// of tokens) is the mean over their loss tokens: the same as evaluating each row alone and dividing the summed token
// losses by the summed counts. The mean of the step-shaped batches' means would differ: the padded batch has 2 rows.
TEST(EvaluationBatching, TheLossIsTheMeanOverTheEvaluatedTokens) {
  const config::Config config = tiny(kSixes, 1);
  const model::ModelSpec model = config::model_spec(config);
  const model::BatchSpec batch = config::batch_spec(config);
  const model::OptimizerSpec optimizer = optimizer_spec(config);
  const rng::RngState rng{static_cast<uint64_t>(config.rng.seed), 0};
  // The end-of-document token: one that row 0 holds, so at least one loss token is masked.
  const int32_t eod_token = recorded(config, 0).batches.at(0).tokens.at(5);
  const data::BatchOptions eod{.eod_mask_loss = true, .eod_token = eod_token};

  CpuBackend backend(model, batch, optimizer, rng);
  Evaluation evaluation(config, model, batch, eod);
  const EvalResult r = evaluation.run(backend);

  RecordingBackend recorder;
  evaluation.run(recorder);
  const size_t seq = static_cast<size_t>(model.seq_length);
  model::BatchSpec single = batch;
  single.micro_batch_size = 1;
  single.num_microbatches = 1;
  model::CpuModel one_row(model, single, optimizer, rng);
  const TrainingState state = backend.state();
  one_row.load_state(state.main_weights, state.exp_avg, state.exp_avg_sq, state.steps_done, state.rng);
  double loss_sum = 0.0, tokens = 0.0;
  bool some_masked = false;
  for (size_t row = 0; row < 18; ++row) {
    const model::HostBatch& from = recorder.batches[row / 8];
    const auto at = static_cast<std::ptrdiff_t>((row % 8) * seq), end = at + static_cast<std::ptrdiff_t>(seq);
    const model::HostBatch alone{{from.tokens.begin() + at, from.tokens.begin() + end},
                                 {from.targets.begin() + at, from.targets.begin() + end},
                                 {from.loss_mask.begin() + at, from.loss_mask.begin() + end}};
    some_masked = some_masked || std::count(alone.loss_mask.begin(), alone.loss_mask.end(), 0.0f) > 0;
    const model::TokenLossSums sums = one_row.evaluate(alone);
    loss_sum += sums.loss;
    tokens += sums.tokens;
  }
  ASSERT_TRUE(some_masked) << "no end-of-document token in the rows: the weighting is not tested";
  EXPECT_LT(tokens, 18.0 * static_cast<double>(seq));
  EXPECT_EQ(r.loss_tokens, tokens);
  EXPECT_NEAR(r.loss, loss_sum / tokens, 1e-12 * r.loss);

  // The mean of the three step-shaped batches' means is another number, so the check above tells them apart.
  model::CpuModel step_shaped(model, batch, optimizer, rng);
  step_shaped.load_state(state.main_weights, state.exp_avg, state.exp_avg_sq, state.steps_done, state.rng);
  double mean_of_means = 0.0;
  for (const model::HostBatch& b : recorder.batches) {
    const model::TokenLossSums sums = step_shaped.evaluate(b);
    mean_of_means += sums.loss / sums.tokens / static_cast<double>(recorder.batches.size());
  }
  EXPECT_GT(std::abs(mean_of_means - r.loss), 1e-6 * r.loss) << mean_of_means << " vs " << r.loss;
}

// validation.full_validation on a corpus split 80,20,0 (100 documents of 100 random tokens; the valid split's 2000
// tokens hold 31 windows of 64): every evaluation reads each of the 31 once, in 6 validation batches of 6, the last
// holding 1. On 2 ranks that last row is rank 1's and rank 0 has none of it; both run 4 step-shaped batches of 4
// rows (rank 0's last row and rank 1's none padding), and together they read the single process's rows.
TEST(EvaluationBatching, FullValidationReadsEachSampleOfTheSetOnce) {
  const std::filesystem::path dir = test::fresh_test_dir("evaluation_full_validation");
  const std::string prefix = (dir / "corpus").string();
  {
    data::IndexedDatasetWriter writer(prefix, data::TokenDtype::uint16);
    std::mt19937 gen(5);
    std::uniform_int_distribution<int32_t> token(0, 255);
    for (int d = 0; d < 100; ++d) {
      std::vector<int32_t> doc(100);
      for (int32_t& t : doc) t = token(gen);
      writer.add_document(doc);
    }
    writer.finalize();
  }
  const std::vector<std::string> overrides = {"dataset.mock=false",
                                              "dataset.data_path=[" + prefix + "]",
                                              "dataset.split=80,20,0",
                                              "model.vocab_size=256",
                                              "train.global_batch_size=8",
                                              "train.eval_interval=1",
                                              "validation.full_validation=true",
                                              "validation.eval_global_batch_size=6",
                                              "validation.eval_micro_batch_size=1"};
  const config::Config one = tiny(overrides, 1);
  const model::ModelSpec model = config::model_spec(one);
  const auto seq = static_cast<size_t>(model.seq_length);
  ASSERT_EQ(data::samples_per_epoch(validation_data_options(one, model)), 31u);

  // Every window of the split, read from the validation stream: each is a distinct row.
  data::DataLoader stream(validation_data_options(one, model));
  std::map<std::vector<int32_t>, int> windows;
  for (int i = 0; i < 31; ++i) {
    std::vector<int32_t> w(seq + 1);
    stream.next(w.data());
    ++windows[std::vector<int32_t>(w.begin(), w.end() - 1)];
  }
  ASSERT_EQ(windows.size(), 31u);

  const Recorded single = recorded(one, 0);
  EXPECT_EQ(single.batching.batches, 6);
  EXPECT_EQ(single.batching.last_global_sequences, 1);
  EXPECT_EQ(single.batching.submissions, 4);  // 31 rows in steps of 8: 1 padding row
  EXPECT_EQ(single.batching.padding_rows, 1);
  std::map<std::vector<int32_t>, int> read;
  for (size_t row = 0; row < 31; ++row) ++read[tokens_of(single.batches, row, seq, 8)];
  EXPECT_EQ(read, windows);
  EXPECT_EQ(mask_of(single.batches, 31, seq, 8), std::vector<float>(seq, 0.0f));

  std::map<std::vector<int32_t>, int> by_ranks;
  for (int rank = 0; rank < 2; ++rank) {
    SCOPED_TRACE(testing::Message() << "rank " << rank);
    const Recorded mine = recorded(tiny(overrides, 2), rank);
    EXPECT_EQ(mine.batching.rows, 15 + rank);
    EXPECT_EQ(mine.batching.submissions, 4);
    ASSERT_EQ(mine.batches.size(), 4u);
    for (size_t row = 0; row < static_cast<size_t>(15 + rank); ++row) ++by_ranks[tokens_of(mine.batches, row, seq, 4)];
    for (size_t row = static_cast<size_t>(15 + rank); row < 16; ++row) {
      EXPECT_EQ(mask_of(mine.batches, row, seq, 4), std::vector<float>(seq, 0.0f)) << "padding row " << row;
    }
  }
  EXPECT_EQ(by_ranks, windows);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace sg::train
