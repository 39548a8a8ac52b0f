// A rank's loaders scan the corpora they open through the rank's share (train/data_options.h DataRank): the training
// batches', the validation's and the test split's, each once, so data-parallel ranks read every corpus once between
// them (data/token_scan_share.h). Two threads stand for the ranks.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "config/model_config.h"
#include "data/thread_scan_exchange.h"
#include "test_dir.h"
#include "train/batch_source.h"
#include "train/data_options.h"
#include "train/evaluation.h"
#include "train/mock_training.h"
#include "train/random_corpus.h"

namespace sg::train {
namespace {

namespace fs = std::filesystem;

TEST(DataRank, EveryLoaderOfTheRankScansThroughItsShare) {
  const fs::path dir = test::fresh_test_dir("data_rank_test", fs::current_path());
  const std::string corpus = (dir / "corpus").string();
  test::write_random_corpus(corpus, {.documents = 400, .min_tokens = 20, .max_tokens = 80, .vocab = 256, .seed = 3});
  config::Config config = test::validated_tiny(
      {"dataset.mock=false", "dataset.data_path=[" + corpus + "]", "dataset.split=80,10,10", "train.eval_interval=1",
       "validation.eval_iters=1", "model.seq_length=64", "dataset.seq_length=64", "train.global_batch_size=8"});
  config.data_parallel_size = 2;
  const model::ModelSpec model = config::model_spec(config);
  const model::BatchSpec batch = config::batch_spec(config);
  test::ThreadScanExchange exchange(2);
  const auto rank = [&](int r) { return DataRank{.rank = r, .scan_share = exchange.share(r)}; };
  // Training's loader opens the corpus: one exchange each. The validation and test loaders made while it is open take
  // it from the open copy.
  test::on_parts<int>(2, [&](int r) {
    BatchSource data(config, model, batch, {}, rank(r));
    Evaluation validation(config, model, batch, {}, rank(r), EvalData::validation);
    Evaluation test(config, model, batch, {}, rank(r), EvalData::test);
    return validation.enabled() && test.enabled() ? 0 : 1;
  });
  EXPECT_EQ(exchange.calls(0), 1);
  EXPECT_EQ(exchange.calls(1), 1);
  // Alone, the validation's and then the test's loader open it again, each through the share. (Apart, for the threads
  // share one process's open corpora: a thread could take the other's still open copy, which no other rank's process
  // can.)
  test::on_parts<int>(
      2, [&](int r) { return Evaluation(config, model, batch, {}, rank(r), EvalData::validation).enabled() ? 0 : 1; });
  test::on_parts<int>(
      2, [&](int r) { return Evaluation(config, model, batch, {}, rank(r), EvalData::test).enabled() ? 0 : 1; });
  EXPECT_EQ(exchange.calls(0), 3);
  EXPECT_EQ(exchange.calls(1), 3);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace sg::train
