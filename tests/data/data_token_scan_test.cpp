// The scan of a corpus's token array (data/token_scan.h) against a plain loop, with the split into chunks and
// threads forced small so a 2-core machine exercises it; and IndexedDataset::open's bad-id message through it.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/indexed_dataset.h"
#include "data/token_arrays.h"
#include "data/token_scan.h"
#include "test_dir.h"

namespace sg::data {
namespace {

using test::Array;
using test::highest;
using test::kIntegerDtypes;
using test::lowest;
using test::random_array;

TokenScanOptions split(unsigned threads, uint64_t chunk_tokens) {
  TokenScanOptions o;
  o.threads = threads;
  o.chunk_tokens = chunk_tokens;
  return o;
}

TokenScan scan(const Array& a, int64_t allowed_min, int64_t allowed_max, const TokenScanOptions& o) {
  return scan_token_array(a.dtype, a.bytes.data(), a.values.size(), allowed_min, allowed_max, o);
}

TEST(TokenScan, SameBoundsAsAPlainLoopAtEverySplit) {
  uint64_t seed = 1;
  for (const TokenDtype dtype : kIntegerDtypes) {
    // Around the vectorized loop's 64-byte steps and the chunks: 0, 1, one step +- 1, chunk multiples +- 1.
    const size_t lanes = 64 / token_dtype_size(dtype);
    for (const size_t n : {size_t{0}, size_t{1}, size_t{2}, lanes - 1, lanes, lanes + 1, size_t{99}, size_t{100},
                           size_t{101}, size_t{300}, size_t{1000}, size_t{1003}, size_t{4097}}) {
      const Array a = random_array(dtype, n, ++seed);
      int64_t lo = 0, hi = 0;
      if (n > 0) {
        lo = *std::min_element(a.values.begin(), a.values.end());
        hi = *std::max_element(a.values.begin(), a.values.end());
      }
      for (const TokenScanOptions& o : {TokenScanOptions{}, split(1, 100), split(2, 100), split(3, 7), split(8, 1),
                                        split(5, lanes + 1), split(4, 1000)}) {
        const TokenScan s = scan(a, INT64_MIN, INT64_MAX, o);
        const std::string where = std::string(token_dtype_name(dtype)) + ", " + std::to_string(n) + " tokens, " +
                                  std::to_string(o.threads) + " threads, chunks of " + std::to_string(o.chunk_tokens);
        EXPECT_EQ(s.min_token, lo) << where;
        EXPECT_EQ(s.max_token, hi) << where;
        EXPECT_FALSE(s.first_bad) << where;
      }
    }
  }
}

// The first bad id by position, wherever the chunks fall and whichever thread reaches its chunk first.
TEST(TokenScan, FindsTheFirstBadIdAcrossChunks) {
  for (const TokenDtype dtype : kIntegerDtypes) {
    const int64_t vocab = std::min<int64_t>(highest(dtype), 100);
    struct Case {
      std::vector<size_t> bad;  // positions of bad ids; the first is the one to find
      int64_t value;
    };
    const bool is_signed = lowest(dtype) < 0;
    std::vector<Case> cases = {{{997}, vocab},         // the last chunk
                               {{3, 850}, vocab + 5},  // the first chunk, and another later
                               {{720, 250}, vocab},    // two chunks, the later written first
                               {{251, 250}, vocab},    // two in one chunk
                               {{999}, highest(dtype)}, {{0}, vocab}};
    if (is_signed) {
      cases.push_back({{401, 900}, -1});
      cases.push_back({{600}, lowest(dtype)});
    }
    for (const Case& c : cases) {
      Array a = random_array(dtype, 1000, 42, 0, vocab - 1);
      for (const size_t i : c.bad) a.set(i, c.value);
      const size_t first = *std::min_element(c.bad.begin(), c.bad.end());
      for (int repeat = 0; repeat < 20; ++repeat) {
        for (const TokenScanOptions& o : {split(1, 100), split(4, 100), split(3, 33), split(16, 1)}) {
          const TokenScan s = scan(a, 0, vocab - 1, o);
          ASSERT_TRUE(s.first_bad) << token_dtype_name(dtype) << " bad at " << first;
          EXPECT_EQ(*s.first_bad, first) << token_dtype_name(dtype) << ", " << o.threads << " threads";
          EXPECT_EQ(s.bad_token, c.value) << token_dtype_name(dtype);
        }
      }
    }
  }
}

// Without a vocabulary the ids must fit int32: only an int64 corpus can break that.
TEST(TokenScan, NoVocabularyMeansInt32) {
  for (const int64_t bad : {int64_t{INT32_MAX} + 1, int64_t{INT32_MIN} - 1, INT64_MAX, INT64_MIN}) {
    Array a = random_array(TokenDtype::int64, 500, 3, INT32_MIN, INT32_MAX);
    a.set(0, INT32_MIN);
    a.set(1, INT32_MAX);
    EXPECT_FALSE(scan(a, INT32_MIN, INT32_MAX, split(3, 64)).first_bad);
    a.set(377, bad);
    const TokenScan s = scan(a, INT32_MIN, INT32_MAX, split(3, 64));
    ASSERT_TRUE(s.first_bad) << bad;
    EXPECT_EQ(*s.first_bad, 377u);
    EXPECT_EQ(s.bad_token, bad);
  }
  const Array full = random_array(TokenDtype::int32, 500, 4);
  EXPECT_FALSE(scan(full, INT32_MIN, INT32_MAX, split(2, 50)).first_bad);
}

TEST(TokenScan, ThreadsOnlyForLargeArrays) {
  constexpr uint64_t MiB = uint64_t{1} << 20;
  EXPECT_EQ(scan_threads(0, 64), 1u);
  EXPECT_EQ(scan_threads(100 * MiB, 64), 1u);  // under two threads' worth: the calling thread alone
  EXPECT_EQ(scan_threads(128 * MiB, 64), 2u);
  EXPECT_EQ(scan_threads(uint64_t{1} << 40, 64), kScanMaxThreads);
  EXPECT_EQ(scan_threads(uint64_t{1} << 40, 2), 2u);
  EXPECT_EQ(scan_threads(uint64_t{1} << 40, 0), 1u);  // hardware_concurrency() unknown
}

TEST(TokenScan, ProgressLinesOnlyWhenItRunsLong) {
  const Array a = random_array(TokenDtype::uint16, 5000, 5);
  std::vector<std::string> lines;
  TokenScanOptions quiet = split(2, 100);
  quiet.progress = [&](const std::string& line) { lines.push_back(line); };
  scan(a, 0, 65535, quiet);  // far below the 5 s after which the first line comes
  EXPECT_TRUE(lines.empty());

  TokenScanOptions chatty = quiet;
  chatty.label = "/data/corpus.bin";
  chatty.progress_after_s = 0;
  chatty.progress_every_s = 0;
  scan(a, 0, 65535, chatty);
  ASSERT_GE(lines.size(), 2u);
  EXPECT_EQ(lines.front().rfind("scanning /data/corpus.bin: ", 0), 0u) << lines.front();
  EXPECT_NE(lines.front().find("% of 0.0 GB, "), std::string::npos) << lines.front();
  EXPECT_NE(lines.front().find(" GB/s"), std::string::npos) << lines.front();
  EXPECT_EQ(lines.back().rfind("scanned /data/corpus.bin: 0.0 GB in ", 0), 0u) << lines.back();
}

// IndexedDataset::open maps the first bad id back to its sequence: the message as before the scan went parallel
// (the existing data_indexed_dataset_test pins its parts), over several chunks and past empty sequences.
TEST(TokenScan, OpenNamesTheFirstBadTokenOfTheCorpus) {
  const test::ScratchDir dir("token_scan");
  const std::string prefix = dir / "corpus";
  constexpr uint64_t kSequence = 1000, kSequences = 40000;  // 40 MB of uint8: three chunks
  {
    IndexedDatasetWriter writer(prefix, TokenDtype::uint8);
    std::vector<int32_t> tokens(kSequence);
    for (uint64_t s = 0; s < kSequences; ++s) {
      for (uint64_t i = 0; i < kSequence; ++i) tokens[i] = static_cast<int32_t>((s + i) % 200);
      if (s == 20000) tokens[7] = 250;  // chunk 1 (bytes 16 MiB to 32 MiB)
      if (s == 35000) tokens[0] = 251;  // chunk 2, after it
      writer.add_document(tokens);
      if (s == 19999) writer.add_document({});  // an empty sequence just before the bad one
    }
    writer.finalize();
  }
  try {
    IndexedDataset::open(prefix, 200);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "data file " + prefix +
                                         ".bin: token id 250 at sequence 20001, position 7 (byte 20000007) is "
                                         "outside [0, vocab_size=200); check the tokenizer and model.vocab_size");
  }
  const IndexedDataset ds = IndexedDataset::open(prefix, 252);
  EXPECT_EQ(ds.min_token(), 0);
  EXPECT_EQ(ds.max_token(), 251);
}

}  // namespace
}  // namespace sg::data
