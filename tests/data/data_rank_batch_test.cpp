// Data-parallel slices of the global batch (data/rank_batch.h): for a blend of two indexed datasets and
// for mock data, over several steps, the ranks' rows put together are exactly the world-size-1 batches,
// every rank ends each batch at the same loader position, and a resume from any rank's position at
// another world size continues the same stream.
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/batch.h"
#include "data/blended_dataset.h"
#include "data/indexed_dataset.h"
#include "data/rank_batch.h"
#include "test_dir.h"

namespace sg::data {
namespace {

namespace fs = std::filesystem;

struct Batch {
  std::vector<int32_t> tokens, targets;
  std::vector<float> mask;
  explicit Batch(int64_t sequences, int64_t seq_length)
      : tokens(static_cast<size_t>(sequences * seq_length)),
        targets(tokens.size()),
        mask(tokens.size()) {}
  HostBatchView view(int64_t sequences, int64_t seq_length) {
    return {tokens.data(), targets.data(), mask.data(), sequences, seq_length};
  }
};

class RankBatchTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = sg::test::fresh_test_dir("sg_rank_batch");
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string corpus(const std::string& name, int documents, int length, int32_t base) {
    const std::string prefix = (dir_ / name).string();
    IndexedDatasetWriter w(prefix, TokenDtype::int32);
    int32_t next = base;
    for (int d = 0; d < documents; ++d) {
      std::vector<int32_t> doc(static_cast<size_t>(length + d % 7));
      for (auto& t : doc) t = next++;
      w.add_document(doc);
    }
    w.finalize();
    return prefix;
  }

  DataLoaderOptions blend_options() {
    DataLoaderOptions o;
    o.data_path = {"0.3", corpus("a", 40, 50, 0), "0.7", corpus("b", 60, 40, 100000)};
    o.seq_length = 16;
    o.vocab_size = 1 << 20;
    o.seed = 11;
    return o;
  }

  fs::path dir_;
};

void expect_union_is_world_one(const DataLoaderOptions& options, int64_t global, int steps) {
  const int64_t L = options.seq_length;
  DataLoader reference(options);
  std::vector<Batch> expected;
  for (int s = 0; s < steps; ++s) {
    expected.emplace_back(global, L);
    fill_batch(reference, expected.back().view(global, L));
  }
  for (const int64_t dp : {1, 2, 4, 8}) {
    if (global % dp != 0) continue;
    std::vector<DataPosition> positions;
    for (int64_t rank = 0; rank < dp; ++rank) {
      DataLoader loader(options);
      const RankRows rows = rank_rows(global, dp, rank);
      for (int s = 0; s < steps; ++s) {
        Batch mine(rows.count, L);
        const DataPosition after = fill_rank_batch(loader, mine.view(rows.count, L), global, rows);
        const size_t offset = static_cast<size_t>(rows.first * L);
        for (size_t i = 0; i < mine.tokens.size(); ++i) {
          ASSERT_EQ(mine.tokens[i], expected[static_cast<size_t>(s)].tokens[offset + i])
              << "dp " << dp << " rank " << rank << " step " << s << " token " << i;
          ASSERT_EQ(mine.targets[i], expected[static_cast<size_t>(s)].targets[offset + i]);
          ASSERT_EQ(mine.mask[i], expected[static_cast<size_t>(s)].mask[offset + i]);
        }
        EXPECT_EQ(after.consumed_samples, static_cast<uint64_t>((s + 1) * global));
      }
      positions.push_back(loader.position());
    }
    for (const DataPosition& p : positions) EXPECT_EQ(p, reference.position()) << "dp " << dp;
  }
}

TEST_F(RankBatchTest, RanksTogetherReadTheWorldOneBatchFromABlend) {
  expect_union_is_world_one(blend_options(), 8, 5);
}

TEST_F(RankBatchTest, RanksTogetherReadTheWorldOneBatchFromMockData) {
  DataLoaderOptions o;
  o.mock = true;
  o.seq_length = 32;
  o.vocab_size = 1000;
  o.seed = 5;
  expect_union_is_world_one(o, 16, 3);
}

TEST_F(RankBatchTest, ResumeAtAnotherWorldSizeContinuesTheStream) {
  const DataLoaderOptions o = blend_options();
  const int64_t global = 8, L = o.seq_length;
  // Two steps at world size 4 (rank 3's position is the one a checkpoint saves: all ranks agree).
  DataLoader at4(o);
  const RankRows rows4 = rank_rows(global, 4, 3);
  for (int s = 0; s < 2; ++s) {
    Batch b(rows4.count, L);
    fill_rank_batch(at4, b.view(rows4.count, L), global, rows4);
  }
  // Resumed at world size 2, rank 0 reads what an uninterrupted world-size-1 run reads at step 3.
  DataLoader resumed(o);
  resumed.seek(at4.position());
  const RankRows rows2 = rank_rows(global, 2, 0);
  Batch mine(rows2.count, L);
  fill_rank_batch(resumed, mine.view(rows2.count, L), global, rows2);
  DataLoader straight(o);
  Batch expected(global, L);
  for (int s = 0; s < 3; ++s) fill_batch(straight, expected.view(global, L));
  for (size_t i = 0; i < mine.tokens.size(); ++i) ASSERT_EQ(mine.tokens[i], expected.tokens[i]) << i;
}

TEST(RankRows, ContiguousEqualBlocksAndClearErrors) {
  EXPECT_EQ(rank_rows(12, 3, 0).first, 0);
  EXPECT_EQ(rank_rows(12, 3, 2).first, 8);
  EXPECT_EQ(rank_rows(12, 3, 2).count, 4);
  EXPECT_THROW(rank_rows(10, 4, 0), Error);
  EXPECT_THROW(rank_rows(8, 2, 2), Error);
  try {
    rank_rows(10, 4, 1);
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("micro_batch_size x data_parallel_size"), std::string::npos) << e.what();
  }
}

// A batch the ranks may not share evenly (full validation's last): contiguous rows, the first ranks one fewer, none
// when the ranks outnumber the rows; where it divides, exactly rank_rows.
TEST(UnevenRankRows, ContiguousTheFirstRanksOneFewerAndRankRowsWhereItDivides) {
  const auto rows = [](int64_t sequences, int64_t ranks, int64_t rank) {
    const RankRows r = uneven_rank_rows(sequences, ranks, rank);
    return std::vector<int64_t>{r.first, r.count};
  };
  EXPECT_EQ(rows(5, 2, 0), (std::vector<int64_t>{0, 2}));
  EXPECT_EQ(rows(5, 2, 1), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(rows(5, 3, 0), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(rows(5, 3, 2), (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(rows(1, 2, 0), (std::vector<int64_t>{0, 0}));
  EXPECT_EQ(rows(1, 2, 1), (std::vector<int64_t>{0, 1}));
  for (int64_t rank = 0; rank < 4; ++rank) {
    const RankRows even = rank_rows(12, 4, rank), uneven = uneven_rank_rows(12, 4, rank);
    EXPECT_EQ(uneven.first, even.first);
    EXPECT_EQ(uneven.count, even.count);
  }
  EXPECT_THROW(uneven_rank_rows(5, 2, 2), Error);
}

}  // namespace
}  // namespace sg::data
