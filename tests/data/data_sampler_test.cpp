// Sample windows, seeded shuffling, blending, exact resume from a saved position, mock data and the
// host batch layout.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <numeric>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/batch.h"
#include "data/blended_dataset.h"
#include "data/dataset_split.h"
#include "data/indexed_dataset.h"
#include "data/shuffle.h"
#include "process_memory.h"
#include "test_dir.h"
#include "test_util.h"

namespace sg::data {
namespace {

namespace fs = std::filesystem;

class SamplerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = sg::test::fresh_test_dir("sg_sampler_test");
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Documents of the given lengths; token value = base + position in the corpus stream, so a window
  // tells exactly where it came from.
  std::string make_corpus(const std::string& name, const std::vector<int>& doc_lengths,
                          int32_t base = 0) {
    const std::string prefix = (dir_ / name).string();
    IndexedDatasetWriter w(prefix, TokenDtype::int32);
    int32_t next = base;
    for (const int len : doc_lengths) {
      std::vector<int32_t> doc(static_cast<size_t>(len));
      for (auto& t : doc) t = next++;
      w.add_document(doc);
    }
    w.finalize();
    return prefix;
  }

  static DataLoaderOptions options(std::vector<std::string> data_path, int64_t seq_length,
                                   uint64_t seed = 7) {
    DataLoaderOptions o;
    o.data_path = std::move(data_path);
    o.seq_length = seq_length;
    o.vocab_size = 1 << 20;
    o.seed = seed;
    return o;
  }

  static std::vector<std::vector<int32_t>> take(DataLoader& loader, int n) {
    std::vector<std::vector<int32_t>> out;
    for (int i = 0; i < n; ++i) {
      std::vector<int32_t> w(static_cast<size_t>(loader.seq_length()) + 1, -1);
      loader.next(w.data());
      out.push_back(w);
    }
    return out;
  }

  fs::path dir_;
};

TEST(ParseDataPath, MegatronForms) {
  auto one = parse_data_path({"a"});
  ASSERT_EQ(one.size(), 1u);
  EXPECT_EQ(one[0].prefix, "a");
  EXPECT_EQ(one[0].weight, 1.0);
  auto plain = parse_data_path({"a", "b"});
  ASSERT_EQ(plain.size(), 2u);
  EXPECT_LT(plain[0].weight, 0.0);  // size-proportional, resolved by the loader
  auto weighted = parse_data_path({"0.3", "a", "0.7", "b"});
  ASSERT_EQ(weighted.size(), 2u);
  EXPECT_EQ(weighted[1].prefix, "b");
  EXPECT_DOUBLE_EQ(weighted[0].weight, 0.3);
  EXPECT_THROW(parse_data_path({}), Error);
  EXPECT_THROW(parse_data_path({"0.3", "a", "0.7"}), Error);     // odd length
  EXPECT_THROW(parse_data_path({"0.3", "a", "x", "b"}), Error);  // weight not a number
  EXPECT_THROW(parse_data_path({"-1", "a", "2", "b"}), Error);   // negative
  EXPECT_THROW(parse_data_path({"0", "a", "0", "b"}), Error);    // all zero
  EXPECT_THROW(parse_data_path({"a", "0.5"}), Error);            // mixed
  try {
    parse_data_path({"0.3", "a", "0.7"});
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("pairs"), std::string::npos) << e.what();
  }
  // The messages name the key the list came from (dataset.valid_data_path is read the same way).
  for (const std::vector<std::string>& bad : std::vector<std::vector<std::string>>{
           {}, {"0.3", "a", "0.7"}, {"0.3", "a", "x", "b"}, {"0", "a", "0", "b"}, {"a", "0.5"}, {"1e308", "a", "1e308", "b"}}) {
    try {
      parse_data_path(bad, "dataset.valid_data_path");
      ADD_FAILURE() << "accepted: " << bad.size() << " entries";
    } catch (const Error& e) {
      EXPECT_EQ(std::string(e.what()).rfind("dataset.valid_data_path", 0), 0u) << e.what();
    }
  }
}

TEST_F(SamplerTest, WindowsCoverEachEpochOnceInShuffledOrder) {
  const auto prefix =
      make_corpus("c", {13, 7, 29, 1, 50});  // 100 tokens, boundaries at 13, 20, 49, 50
  DataLoader loader(options({prefix}, 7));
  const uint64_t windows = 99 / 7;  // 14
  std::vector<std::vector<uint64_t>> epoch_orders(3);
  bool crosses_boundary = false;
  for (uint64_t e = 0; e < 3; ++e) {
    for (const auto& w : take(loader, static_cast<int>(windows))) {
      ASSERT_EQ(w.size(), 8u);
      ASSERT_EQ(w[0] % 7, 0) << "windows start at multiples of seq_length";
      for (size_t i = 1; i < w.size(); ++i)
        ASSERT_EQ(w[i], w[0] + static_cast<int32_t>(i)) << "contiguous";
      for (const int b : {13, 20, 49, 50}) crosses_boundary |= w[0] < b && w.back() >= b;
      epoch_orders[e].push_back(static_cast<uint64_t>(w[0] / 7));
    }
    std::vector<uint64_t> sorted = epoch_orders[e];
    std::sort(sorted.begin(), sorted.end());
    std::vector<uint64_t> all(windows);
    std::iota(all.begin(), all.end(), 0);
    EXPECT_EQ(sorted, all) << "epoch " << e << " visits every window exactly once";
  }
  EXPECT_TRUE(crosses_boundary) << "samples run across document boundaries";
  EXPECT_NE(epoch_orders[0], epoch_orders[1]) << "each epoch is reshuffled";
  std::vector<uint64_t> identity(windows);
  std::iota(identity.begin(), identity.end(), 0);
  EXPECT_NE(epoch_orders[0], identity) << "the order is shuffled";
  EXPECT_EQ(loader.position().consumed_samples, 3 * windows);
}

TEST_F(SamplerTest, SeedDeterminesOrder) {
  const auto prefix = make_corpus("c", {500});
  DataLoader a(options({prefix}, 9, 1)), b(options({prefix}, 9, 1)), c(options({prefix}, 9, 2));
  const auto sa = take(a, 60), sb = take(b, 60), sc = take(c, 60);
  EXPECT_EQ(sa, sb);
  EXPECT_NE(sa, sc);
}

TEST_F(SamplerTest, ResumeFromSavedPositionIsExact) {
  const auto p1 = make_corpus("a", {40, 33, 90}, 0);
  const auto p2 = make_corpus("b", {300}, 100000);
  for (const auto& path :
       std::vector<std::vector<std::string>>{{p1}, {"0.3", p1, "0.7", p2}, {p1, p2}}) {
    DataLoader uninterrupted(options(path, 5));
    const auto reference = take(uninterrupted, 200);  // several epochs of source a (32 windows)

    DataLoader first(options(path, 5));
    take(first, 77);
    // Through JSON text, as a checkpoint stores it.
    const std::string saved = first.position().to_json().dump();
    DataLoader resumed(options(path, 5));
    resumed.seek(DataPosition::from_json(nlohmann::json::parse(saved)));
    EXPECT_EQ(resumed.position(), first.position());
    const auto rest = take(resumed, 123);
    for (int i = 0; i < 123; ++i)
      ASSERT_EQ(rest[static_cast<size_t>(i)], reference[static_cast<size_t>(77 + i)]) << i;
  }
}

TEST_F(SamplerTest, BlendFollowsWeightsExactly) {
  const auto a = make_corpus("a", {100}, 0);
  const auto b = make_corpus("b", {100}, 100000);
  DataLoader loader(options({"0.25", a, "0.75", b}, 4));
  int from_b = 0;
  for (int k = 1; k <= 400; ++k) {
    const auto w = take(loader, 1)[0];
    from_b += w[0] >= 100000 ? 1 : 0;
    // Greedy blending keeps every prefix within one sample of its share.
    ASSERT_LE(std::abs(from_b - 0.75 * k), 1.0) << "after " << k << " samples";
  }
  EXPECT_EQ(from_b, 300);
  EXPECT_EQ(loader.position().per_source, (std::vector<uint64_t>{100, 300}));

  // Unweighted: proportional to size (200 vs 600 tokens).
  const auto small = make_corpus("s", {200}, 0);
  const auto large = make_corpus("l", {600}, 100000);
  DataLoader unweighted(options({small, large}, 4));
  EXPECT_DOUBLE_EQ(unweighted.weights()[0], 0.25);
  take(unweighted, 100);
  EXPECT_EQ(unweighted.position().per_source, (std::vector<uint64_t>{25, 75}));
}

// blend_by_windows (validation.full_validation): an unweighted blend of datasets whose windows are not in proportion
// to their tokens (small ones, where (tokens - 1) / seq_length rounds far down) yields, in its first
// samples_per_epoch samples, every window of every dataset exactly once; weighing by tokens (the default) reads the
// small ones into their second epoch.
TEST_F(SamplerTest, ABlendByWindowsReadsEveryWindowOnceInOneEpoch) {
  const auto a = make_corpus("wa", {7}, 0);         // 7 tokens: 1 window of 4
  const auto b = make_corpus("wb", {11}, 100000);   // 11 tokens: 2 windows
  const auto c = make_corpus("wc", {101}, 200000);  // 101 tokens: 25 windows
  DataLoaderOptions by_windows = options({a, b, c}, 4);
  by_windows.blend_by_windows = true;
  const uint64_t samples = samples_per_epoch(by_windows);
  ASSERT_EQ(samples, 1u + 2u + 25u);
  DataLoader loader(by_windows);
  std::set<std::vector<int32_t>> seen;
  for (const auto& w : take(loader, static_cast<int>(samples))) seen.insert(w);
  EXPECT_EQ(seen.size(), samples) << "a window read twice";
  EXPECT_EQ(loader.position().per_source, (std::vector<uint64_t>{1, 2, 25}));

  DataLoader by_tokens(options({a, b, c}, 4));
  take(by_tokens, static_cast<int>(samples));
  EXPECT_NE(by_tokens.position().per_source, (std::vector<uint64_t>{1, 2, 25}));
}

TEST_F(SamplerTest, MockIsSeededAndResumable) {
  DataLoaderOptions o;
  o.mock = true;
  o.seq_length = 16;
  o.vocab_size = 50;
  o.seed = 3;
  DataLoader a(o), b(o);
  const auto sa = take(a, 20);
  EXPECT_EQ(sa, take(b, 20));
  std::set<int32_t> seen;
  for (const auto& w : sa)
    for (const int32_t t : w) {
      ASSERT_GE(t, 0);
      ASSERT_LT(t, 50);
      seen.insert(t);
    }
  EXPECT_GT(seen.size(), 40u) << "tokens spread over the vocabulary";
  EXPECT_NE(sa[0], sa[1]);
  DataLoader c(o);
  c.seek(a.position());
  EXPECT_EQ(take(c, 5), take(a, 5));
  o.seed = 4;
  DataLoader d(o);
  EXPECT_NE(take(d, 1)[0], sa[0]);
}

TEST_F(SamplerTest, RefusesPositionsOfAnotherConfig) {
  const auto a = make_corpus("a", {100});
  const auto b = make_corpus("b", {100});
  DataLoader loader(options({a, b}, 4));
  DataPosition wrong_sources{10, {10}};
  EXPECT_THROW(loader.seek(wrong_sources), Error);
  DataPosition wrong_sum{10, {3, 4}};
  EXPECT_THROW(loader.seek(wrong_sum), Error);
  // Counts whose sum wraps around to consumed_samples.
  DataPosition wrapping{16, {UINT64_MAX, 17}};
  const std::string message = test::thrown_message([&] { loader.seek(wrapping); });
  EXPECT_NE(message.find("overflow"), std::string::npos) << message;
  EXPECT_THROW(DataPosition::from_json(nlohmann::json{{"consumed_samples", -1}}), Error);
}

TEST_F(SamplerTest, RefusesTooSmallDatasetAndBadTokens) {
  const auto tiny = make_corpus("tiny", {8});
  try {
    DataLoader loader(options({tiny}, 8));
    ADD_FAILURE() << "8 tokens cannot make a window of 9";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(tiny), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("seq_length + 1 = 9"), std::string::npos) << e.what();
  }
  const auto big_ids = make_corpus("ids", {100}, 1000);
  auto o = options({big_ids}, 4);
  o.vocab_size = 1050;
  try {
    DataLoader loader(o);
    ADD_FAILURE() << "token ids up to 1099 with vocab 1050";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(big_ids + ".bin"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("token id 1050"), std::string::npos) << e.what();
  }
}

TEST_F(SamplerTest, FillBatchLayout) {
  const auto prefix = make_corpus("c", {10, 10, 10, 10, 10, 10});
  const int64_t L = 6, rows = 5;
  DataLoader loader(options({prefix}, L)), twin(options({prefix}, L));
  std::vector<int32_t> tokens(rows * L, -7), targets(rows * L, -7);
  std::vector<float> mask(rows * L, -1.0f);
  HostBatchView view{tokens.data(), targets.data(), mask.data(), rows, L};
  const DataPosition after = fill_batch(loader, view);
  EXPECT_EQ(after, loader.position());
  EXPECT_EQ(after.consumed_samples, static_cast<uint64_t>(rows));
  const auto windows = take(twin, static_cast<int>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t t = 0; t < L; ++t) {
      EXPECT_EQ(tokens[r * L + t], windows[r][t]);
      EXPECT_EQ(targets[r * L + t], windows[r][t + 1]);
      EXPECT_EQ(mask[r * L + t], 1.0f);
    }
  }
  // eod_mask_loss: positions whose input token is the EOD id get mask 0.
  const int32_t eod = tokens[3];
  DataLoader again(options({prefix}, L));
  fill_batch(again, view, BatchOptions{true, eod});
  for (int64_t i = 0; i < rows * L; ++i) EXPECT_EQ(mask[i], tokens[i] == eod ? 0.0f : 1.0f);
  EXPECT_EQ(mask[3], 0.0f);
  HostBatchView wrong = view;
  wrong.seq_length = L + 1;
  EXPECT_THROW(fill_batch(again, wrong), Error);
}

// Training's loader and dataset.split's validation loader of one corpus share its one open copy: the second loader
// neither maps the files again nor scans every token again (IndexedDataset::open reads the whole .bin: 2 TB for a
// 10^12-token uint16 corpus, per rank, twice per start before). Shown by moving the files away between the two: the
// validation loader still reads its documents. Once no loader holds the corpus, a loader opens the files again.
TEST_F(SamplerTest, TheValidationSplitSharesTheTrainingLoadersOpenCorpus) {
  const std::string prefix = make_corpus("shared", {4, 4, 4, 4, 4, 4, 4, 4, 4, 4});  // 10 documents of 4 tokens
  auto split_options = [&](Split split) {
    DataLoaderOptions o = options({prefix}, 3);
    o.split_shares = parse_split("6,3,1");  // documents [0,6) train, [6,9) valid, [9,10) test
    o.split = split;
    return o;
  };
  auto train = std::make_unique<DataLoader>(split_options(Split::train));
  const std::string away = (dir_ / "away").string();
  fs::rename(prefix + ".bin", away + ".bin");
  fs::rename(prefix + ".idx", away + ".idx");
  DataLoader valid(split_options(Split::valid));  // opened again, it would find no files
  for (const auto& window : take(valid, 12)) {
    for (const int32_t token : window) {
      EXPECT_GE(token, 24) << "a window outside the valid split's documents [6, 9)";
      EXPECT_LT(token, 36) << "a window outside the valid split's documents [6, 9)";
    }
  }
  train.reset();
  DataLoader kept(split_options(Split::test));  // the validation loader still holds the corpus
  EXPECT_EQ(take(kept, 1).front(), (std::vector<int32_t>{36, 37, 38, 39}));
}

TEST_F(SamplerTest, ACorpusNoLoaderHoldsIsOpenedAgain) {
  const std::string prefix = make_corpus("reopened", {8, 8});
  { DataLoader first(options({prefix}, 3)); }
  fs::remove(prefix + ".bin");
  EXPECT_THROW(DataLoader(options({prefix}, 3)), Error);
}

// The permutation is the same stored in 4 bytes an index as in 8 (a corpus's sample order, hence its resume, does
// not depend on the storage).
TEST(SeededPermutation, FourByteIndicesHoldTheSameOrder) {
  for (const uint64_t n : {uint64_t{0}, uint64_t{1}, uint64_t{2}, uint64_t{97}, uint64_t{100'003}}) {
    for (const uint64_t seed : {uint64_t{7}, mix_seed(1234, 0, 5)}) {
      const std::vector<uint64_t> wide = seeded_permutation(n, seed);
      const std::vector<uint32_t> narrow = seeded_permutation<uint32_t>(n, seed);
      EXPECT_TRUE(std::equal(wide.begin(), wide.end(), narrow.begin(), narrow.end())) << n << " " << seed;
    }
  }
}

// A source's epoch order takes 4 bytes a window (8M windows: 32 MB; it was 64 MB, and a 10^12-token corpus's 2.4e8
// windows at seq_length 4096 took 2 GB in every rank), and reads the windows it always read.
TEST_F(SamplerTest, AnEpochOrderTakesFourBytesAWindow) {
  constexpr int64_t kWindows = 8'000'000;  // seq_length 1: a window per token but the last
  const std::string prefix = (dir_ / "long").string();
  {
    IndexedDatasetWriter w(prefix, TokenDtype::uint16);
    std::vector<int32_t> doc(static_cast<size_t>(kWindows) + 1);
    for (size_t i = 0; i < doc.size(); ++i) doc[i] = static_cast<int32_t>(i % 65536);
    w.add_document(doc);
    w.finalize();
  }
  IndexedSampleSource source(IndexedDataset::open(prefix, 65536), /*seq_length=*/1, /*seed=*/7, /*source_id=*/0);
  const int64_t before = test::resident_anonymous_bytes();
  if (before < 0) GTEST_SKIP() << "no RssAnon in /proc/self/status";
  int32_t window[2] = {-1, -1};
  source.sample(0, window);  // builds epoch 0's order
  const int64_t grown = test::resident_anonymous_bytes() - before;
  if (!test::kSanitizedAllocator) {  // a sanitizer's allocator and shadow take memory of their own
    EXPECT_LT(grown, 48 << 20) << "an order of " << kWindows << " windows took " << grown << " bytes";
  }
  const std::vector<uint64_t> order = seeded_permutation(static_cast<uint64_t>(kWindows), mix_seed(7, 0, 0));
  for (const uint64_t k : {uint64_t{0}, uint64_t{1}, uint64_t{4'999'999}, uint64_t{kWindows - 1}}) {
    source.sample(k, window);
    EXPECT_EQ(window[0], static_cast<int32_t>(order[k] % 65536)) << "sample " << k;
    EXPECT_EQ(window[1], static_cast<int32_t>((order[k] + 1) % 65536)) << "sample " << k;
  }
}

}  // namespace
}  // namespace sg::data
