// Data-parallel evaluation (issue 16): each rank evaluates its rows of every validation batch, so the
// ranks together read exactly the batches a single process evaluates (the backend sums their losses,
// each scaled by 1 / (microbatches x ranks), into the global mean).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "config/config.h"
#include "config/model_config.h"
#include "core/error.h"
#include "train/backend.h"
#include "train/evaluation.h"
#include "train/mock_training.h"
#include "train/recording_backend.h"

namespace sg::train {
namespace {

using test::RecordingBackend;

std::vector<model::HostBatch> evaluated_batches(int data_parallel_size, int rank) {
  config::Config config = test::validated_tiny({"dataset.mock=true", "train.global_batch_size=8",
                                                "train.eval_interval=1", "train.eval_iters=3"});
  config.data_parallel_size = data_parallel_size;
  const model::ModelSpec model = config::model_spec(config);
  const model::BatchSpec batch = config::batch_spec(config);
  Evaluation evaluation(config, model, batch, {}, {.rank = rank, .scan_share = {}});
  RecordingBackend backend;
  evaluation.run(backend);
  evaluation.run(backend);  // rewound: the same batches again
  return backend.batches;
}

template <class T>
std::vector<T> rows(const std::vector<T>& v, size_t first, size_t count, size_t seq) {
  return std::vector<T>(v.begin() + static_cast<std::ptrdiff_t>(first * seq),
                        v.begin() + static_cast<std::ptrdiff_t>((first + count) * seq));
}

TEST(EvaluationRanks, RanksTogetherEvaluateTheSingleProcessBatches) {
  const std::vector<model::HostBatch> whole = evaluated_batches(1, 0);
  ASSERT_EQ(whole.size(), 6u);
  const size_t seq = static_cast<size_t>(config::model_spec(test::validated_tiny({"dataset.mock=true"})).seq_length);
  ASSERT_EQ(whole[0].tokens.size(), 8 * seq);
  EXPECT_EQ(whole[3].tokens, whole[0].tokens);  // every evaluation reads the same batches
  EXPECT_NE(whole[1].tokens, whole[0].tokens);
  for (int rank = 0; rank < 2; ++rank) {
    const std::vector<model::HostBatch> mine = evaluated_batches(2, rank);
    ASSERT_EQ(mine.size(), whole.size());
    for (size_t b = 0; b < mine.size(); ++b) {
      SCOPED_TRACE(testing::Message() << "rank " << rank << ", batch " << b);
      const size_t first = static_cast<size_t>(rank) * 4;
      EXPECT_EQ(mine[b].tokens, rows(whole[b].tokens, first, 4, seq));
      EXPECT_EQ(mine[b].targets, rows(whole[b].targets, first, 4, seq));
      EXPECT_EQ(mine[b].loss_mask, rows(whole[b].loss_mask, first, 4, seq));
    }
  }
}

}  // namespace
}  // namespace sg::train
