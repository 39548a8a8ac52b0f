// The token scan shared by data-parallel ranks (data/token_scan_share.h): parts scanned by threads standing for the
// ranks, their results exchanged in memory, must give every part the result of one scan of the whole array, and
// IndexedDataset::open the same message on every rank.
#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "data/blended_dataset.h"
#include "data/indexed_dataset.h"
#include "data/thread_scan_exchange.h"
#include "data/token_arrays.h"
#include "data/token_scan_share.h"
#include "test_dir.h"

namespace sg::data {
namespace {

using test::on_parts;
using ThreadExchange = test::ThreadScanExchange;

TEST(TokenScanShare, PartsTileTheArrayInWholeChunks) {
  for (const uint64_t tokens : {0ull, 1ull, 99ull, 100ull, 101ull, 1000ull, 12345ull}) {
    for (const uint64_t chunk : {1ull, 7ull, 100ull, 5000ull}) {
      for (const int parts : {1, 2, 3, 8, 20}) {
        const uint64_t chunks = (tokens + chunk - 1) / chunk;
        uint64_t next = 0;
        for (int p = 0; p < parts; ++p) {
          const PartRange r = scan_part_range(tokens, chunk, p, parts);
          SCOPED_TRACE(testing::Message() << tokens << " tokens, chunk " << chunk << ", part " << p << " of " << parts);
          EXPECT_EQ(r.begin, next);
          EXPECT_LE(r.begin, r.end);
          if (r.end < tokens) {
            EXPECT_EQ(r.end % chunk, 0u);
          }
          // As even as whole chunks go: a part holds floor or ceil of chunks / parts.
          const uint64_t part_chunks = (r.end - r.begin + chunk - 1) / chunk;
          EXPECT_GE(part_chunks, chunks / parts);
          EXPECT_LE(part_chunks, (chunks + parts - 1) / parts);
          next = r.end;
        }
        EXPECT_EQ(next, tokens);
      }
    }
  }
  EXPECT_THROW(scan_part_range(10, 1, 2, 2), Error);
  EXPECT_THROW(scan_part_range(10, 0, 0, 2), Error);
}

TEST(TokenScanShare, APartsResultTravelsAsText) {
  PartScan part{
      .corpus = "/data/with space/corpus.bin", .num_tokens = 1ull << 40, .range = {16, 1ull << 39}, .scan = {}};
  part.scan.min_token = -5;
  part.scan.max_token = 128000;
  part.scan.first_bad = (1ull << 38) + 3;
  part.scan.bad_token = -5;
  const PartScan back = decode_part_scan(encode_part_scan(part));
  EXPECT_EQ(back.corpus, part.corpus);
  EXPECT_EQ(back.num_tokens, part.num_tokens);
  EXPECT_EQ(back.range.begin, part.range.begin);
  EXPECT_EQ(back.range.end, part.range.end);
  EXPECT_EQ(back.scan.min_token, -5);
  EXPECT_EQ(back.scan.max_token, 128000);
  ASSERT_TRUE(back.scan.first_bad);
  EXPECT_EQ(*back.scan.first_bad, part.scan.first_bad);
  EXPECT_EQ(back.scan.bad_token, -5);
  part.scan.first_bad.reset();
  EXPECT_FALSE(decode_part_scan(encode_part_scan(part)).scan.first_bad);
  for (const char* bad :
       {"", "1 2 3", "10 0 11 0 0 0 0 0\nx", "10 5 4 0 0 0 0 0\nx", "10 0 5 0 0 2 0 0\nx", "10 0 5 0 0 0 0 0 7\nx",
        "10 0 5 0 0 1 7 0\nx"}) {  // the last: a first bad id outside the part's range
    EXPECT_THROW(decode_part_scan(bad), Error) << bad;
  }
}

// The combination goes back to every part as text: the scan, or the error combining raised, which every part raises.
TEST(TokenScanShare, TheCombinedResultTravelsBackOrEveryPartRaisesItsError) {
  TokenScan scan;
  scan.min_token = -3;
  scan.max_token = 70000;
  scan.first_bad = 1ull << 41;
  scan.bad_token = 70000;
  const TokenScan back = decode_combined_scan(encode_combined_scan(scan));
  EXPECT_EQ(back.min_token, -3);
  EXPECT_EQ(back.max_token, 70000);
  EXPECT_EQ(back.first_bad, scan.first_bad);
  EXPECT_EQ(back.bad_token, 70000);
  scan.first_bad.reset();
  EXPECT_FALSE(decode_combined_scan(encode_combined_scan(scan)).first_bad);
  try {
    decode_combined_scan(encode_combined_error("the ranks' parts ...\nsecond line"));
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_EQ(std::string(e.what()), "the ranks' parts ...\nsecond line");
  }
  for (const char* bad : {"", "scan 1 2", "scan 1 2 0 0 0 9", "scam 1 2 0 0 0"}) {
    EXPECT_THROW(decode_combined_scan(bad), Error) << bad;
  }
}

// Every part, whatever the split, ends with what one scan of the whole array finds: the bounds, or the first bad id
// and its value when the array holds one (in the first part, the last, or in several).
TEST(TokenScanShare, PartsTogetherScanAsOneScanOfTheWholeArray) {
  for (const TokenDtype dtype : test::kIntegerDtypes) {
    const int64_t vocab = std::min<int64_t>(test::highest(dtype), 100);
    test::Array a = test::random_array(dtype, 1000, 11, 0, vocab - 1);
    std::vector<std::vector<size_t>> bad_sets = {{}, {3}, {999}, {420, 700}, {0, 999}};
    for (const std::vector<size_t>& bad : bad_sets) {
      test::Array b = a;
      for (size_t i : bad) b.set(i, vocab + static_cast<int64_t>(i % 7));
      TokenScanOptions o;
      o.threads = 2;
      o.chunk_tokens = 64;
      const TokenScan whole = scan_token_array(dtype, b.bytes.data(), b.values.size(), 0, vocab - 1, o);
      for (const int parts : {1, 2, 3, 4, 7, 20}) {
        SCOPED_TRACE(testing::Message() << token_dtype_name(dtype) << ", " << bad.size() << " bad, " << parts
                                        << " parts");
        ThreadExchange exchange(parts);
        const auto results = on_parts<TokenScan>(parts, [&](int p) {
          return scan_token_array_shared(dtype, b.bytes.data(), b.values.size(), 0, vocab - 1, exchange.share(p),
                                         "corpus", o);
        });
        for (const TokenScan& s : results) {
          EXPECT_EQ(s.first_bad, whole.first_bad);
          if (whole.first_bad) {
            EXPECT_EQ(*s.first_bad, bad.front());
            EXPECT_EQ(s.bad_token, whole.bad_token);
          } else {
            EXPECT_EQ(s.min_token, whole.min_token);
            EXPECT_EQ(s.max_token, whole.max_token);
          }
        }
      }
    }
  }
}

TEST(TokenScanShare, AnEmptyArrayAndPartsWithoutTokens) {
  const test::Array a = test::random_array(TokenDtype::uint16, 5, 3, 10, 20);  // one chunk: parts 1-3 hold nothing
  TokenScanOptions o;
  o.chunk_tokens = 64;
  ThreadExchange exchange(4);
  const auto results = on_parts<TokenScan>(4, [&](int p) {
    return scan_token_array_shared(TokenDtype::uint16, a.bytes.data(), 5, 0, 100, exchange.share(p), "corpus", o);
  });
  const TokenScan whole = scan_token_array(TokenDtype::uint16, a.bytes.data(), 5, 0, 100, o);
  for (const TokenScan& s : results) {
    EXPECT_EQ(s.min_token, whole.min_token);  // not the empty parts' placeholder 0
    EXPECT_EQ(s.max_token, whole.max_token);
    EXPECT_FALSE(s.first_bad);
  }
  ThreadExchange none(3);
  for (const TokenScan& s : on_parts<TokenScan>(3, [&](int p) {
         return scan_token_array_shared(TokenDtype::uint16, a.bytes.data(), 0, 0, 100, none.share(p), "corpus", o);
       })) {
    EXPECT_EQ(s.min_token, 0);
    EXPECT_EQ(s.max_token, 0);
    EXPECT_FALSE(s.first_bad);
  }
}

// Ranks that opened different corpora at the same point would combine unrelated parts: an error naming both.
TEST(TokenScanShare, PartsOfDifferentCorporaAreAnErrorNamingThem) {
  const PartScan a{.corpus = "/data/a.bin", .num_tokens = 100, .range = {0, 50}, .scan = {}};
  const PartScan b{.corpus = "/data/b.bin", .num_tokens = 100, .range = {50, 100}, .scan = {}};
  try {
    combine_part_scans({a, b});
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("rank 0 scanned tokens [0, 50) of /data/a.bin"), std::string::npos) << m;
    EXPECT_NE(m.find("rank 1 scanned tokens [50, 100) of /data/b.bin"), std::string::npos) << m;
    EXPECT_NE(m.find("in the same order"), std::string::npos) << m;
  }
  PartScan other_size = b;
  other_size.corpus = a.corpus;
  other_size.num_tokens = 120;
  EXPECT_THROW(combine_part_scans({a, other_size}), Error);
  PartScan gap = b;
  gap.corpus = a.corpus;
  gap.range = {60, 100};
  EXPECT_THROW(combine_part_scans({a, gap}), Error);
  PartScan short_end = b;
  short_end.corpus = a.corpus;
  short_end.range = {50, 90};
  EXPECT_THROW(combine_part_scans({a, short_end}), Error);
  PartScan b_of_a = b;
  b_of_a.corpus = a.corpus;
  EXPECT_NO_THROW(combine_part_scans({a, b_of_a}));
}

// IndexedDataset::open with a share: the rank whose part holds no bad id stops with the same message as the one whose
// part does, which is the message of a single process's open; and a good corpus has the whole corpus's bounds.
TEST(TokenScanShare, EveryRankNamesTheSameFirstBadToken) {
  const test::ScratchDir dir("token_scan_share");
  const std::string prefix = dir / "corpus";
  constexpr uint64_t kSequence = 1000, kSequences = 40000;  // 40 MB of uint8: three chunks, one a rank of 3
  {
    IndexedDatasetWriter writer(prefix, TokenDtype::uint8);
    std::vector<int32_t> tokens(kSequence);
    for (uint64_t s = 0; s < kSequences; ++s) {
      for (uint64_t i = 0; i < kSequence; ++i) tokens[i] = static_cast<int32_t>((s + i) % 200);
      if (s == 39000) tokens[5] = 250;  // the last chunk: rank 2's
      writer.add_document(tokens);
    }
    writer.finalize();
  }
  std::string single;
  try {
    IndexedDataset::open(prefix, 200);
  } catch (const Error& e) {
    single = e.what();
  }
  ASSERT_NE(single.find("token id 250 at sequence 39000, position 5"), std::string::npos) << single;
  ThreadExchange exchange(3);
  const auto messages = on_parts<std::string>(3, [&](int p) -> std::string {
    try {
      IndexedDataset::open(prefix, 200, exchange.share(p));
      return "no error";
    } catch (const Error& e) {
      return e.what();
    }
  });
  for (const std::string& m : messages) EXPECT_EQ(m, single);

  ThreadExchange good(3);
  const auto bounds = on_parts<std::pair<int64_t, int64_t>>(3, [&](int p) {
    const IndexedDataset ds = IndexedDataset::open(prefix, 256, good.share(p));
    return std::pair{ds.min_token(), ds.max_token()};
  });
  for (const auto& [lo, hi] : bounds) {
    EXPECT_EQ(lo, 0);
    EXPECT_EQ(hi, 250);
  }

  // A rank checking against another vocabulary would pass ids the others refuse: every rank stops, naming both.
  ThreadExchange vocabularies(3);
  const auto mismatch = on_parts<std::string>(3, [&](int p) -> std::string {
    try {
      IndexedDataset::open(prefix, p == 1 ? 300 : 256, vocabularies.share(p));
      return "no error";
    } catch (const Error& e) {
      return e.what();
    }
  });
  for (const std::string& m : mismatch) {
    EXPECT_EQ(m, mismatch[0]);
    EXPECT_NE(m.find("are not parts of one corpus"), std::string::npos) << m;
    EXPECT_NE(m.find("ids checked against [0, 255]"), std::string::npos) << m;
    EXPECT_NE(m.find("rank 1 scanned tokens [16777216, 33554432) of " + prefix +
                     ".bin (uint8, 40000000 tokens in 40000 sequences and 40000 documents, ids checked against "
                     "[0, 299])"),
              std::string::npos)
        << m;
  }

  // A blend naming the corpus twice opens and scans it once: one exchange.
  ThreadExchange blend(2);
  on_parts<int>(2, [&](int p) {
    DataLoaderOptions options;
    options.data_path = {"1", prefix, "2", prefix};
    options.seq_length = 16;
    options.vocab_size = 256;
    options.scan_share = blend.share(p);
    DataLoader loader(options);
    return 0;
  });
  EXPECT_EQ(blend.calls(0), 1);
  EXPECT_EQ(blend.calls(1), 1);
}

}  // namespace
}  // namespace sg::data
