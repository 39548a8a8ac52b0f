// The Megatron indexed-dataset reader against .bin/.idx files built byte by byte here,
// independently of src/data's writer, plus every bad-data error.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/indexed_dataset.h"
#include "process_memory.h"
#include "test_dir.h"

namespace sg::data {
namespace {

namespace fs = std::filesystem;

// Little-endian bytes, one at a time.
struct Bytes {
  std::vector<uint8_t> b;
  void u8(uint64_t v) { b.push_back(static_cast<uint8_t>(v & 0xff)); }
  void le(uint64_t v, int n) {
    for (int i = 0; i < n; ++i) u8(v >> (8 * i));
  }
  void u64(uint64_t v) { le(v, 8); }
  void i64(int64_t v) { le(static_cast<uint64_t>(v), 8); }
  void i32(int32_t v) { le(static_cast<uint32_t>(v), 4); }
  void text(const char* s, size_t n) {
    for (size_t i = 0; i < n; ++i) u8(static_cast<uint8_t>(s[i]));
  }
};

int dtype_bytes(uint8_t code) {
  switch (code) {
    case 1:
    case 2:
      return 1;
    case 3:
    case 8:
      return 2;
    case 4:
    case 7:
      return 4;
    default:
      return 8;
  }
}

// A corpus description, rendered to bytes the way Megatron's _IndexWriter lays them out.
struct Corpus {
  uint8_t code = 8;  // uint16
  std::vector<std::vector<int64_t>> sequences;
  std::vector<int64_t> doc_index;
  // Overrides to produce bad files:
  const char* magic = "MMIDIDX\0\0";
  uint64_t version = 1;
  int64_t seq_count = -1;  // -1: the real count
  int64_t doc_count = -1;
  std::vector<int64_t> offsets;  // empty: contiguous
  std::vector<int32_t> lengths;  // empty: real lengths

  Bytes bin() const {
    Bytes out;
    for (const auto& s : sequences)
      for (const int64_t t : s) out.le(static_cast<uint64_t>(t), dtype_bytes(code));
    return out;
  }
  Bytes idx() const {
    Bytes out;
    out.text(magic, 9);
    out.u64(version);
    out.u8(code);
    out.u64(seq_count >= 0 ? static_cast<uint64_t>(seq_count) : sequences.size());
    out.u64(doc_count >= 0 ? static_cast<uint64_t>(doc_count) : doc_index.size());
    for (size_t i = 0; i < sequences.size(); ++i)
      out.i32(lengths.empty() ? static_cast<int32_t>(sequences[i].size()) : lengths[i]);
    int64_t offset = 0;
    for (size_t i = 0; i < sequences.size(); ++i) {
      out.i64(offsets.empty() ? offset : offsets[i]);
      offset += static_cast<int64_t>(sequences[i].size()) * dtype_bytes(code);
    }
    for (const int64_t d : doc_index) out.i64(d);
    return out;
  }
};

void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  ASSERT_TRUE(f.good()) << path;
}

class IndexedDatasetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = sg::test::fresh_test_dir("sg_idx_test");
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write(const Corpus& c, const std::string& name = "corpus") {
    const std::string prefix = (dir_ / name).string();
    write_bytes(prefix + ".idx", c.idx().b);
    write_bytes(prefix + ".bin", c.bin().b);
    return prefix;
  }

  // Three documents: [5 tokens] | [3 tokens][4 tokens] | [empty][2 tokens].
  static Corpus sample_corpus() {
    Corpus c;
    c.sequences = {{10, 11, 12, 13, 14}, {20, 21, 22}, {30, 31, 32, 33}, {}, {40, 41}};
    c.doc_index = {0, 1, 3, 5};
    return c;
  }

  // Opens `prefix` expecting an sg::Error whose message contains every string in `needles`.
  static void expect_error(const std::string& prefix, int64_t vocab,
                           const std::vector<std::string>& needles) {
    try {
      IndexedDataset::open(prefix, vocab);
      ADD_FAILURE() << "no error for " << prefix;
    } catch (const Error& e) {
      const std::string msg = e.what();
      for (const auto& n : needles)
        EXPECT_NE(msg.find(n), std::string::npos) << "missing \"" << n << "\" in: " << msg;
    }
  }

  fs::path dir_;
};

TEST_F(IndexedDatasetTest, ReadsMegatronLayout) {
  const std::string prefix = write(sample_corpus());
  const auto ds = IndexedDataset::open(prefix, 100);
  EXPECT_EQ(ds.dtype(), TokenDtype::uint16);
  EXPECT_EQ(ds.num_sequences(), 5u);
  EXPECT_EQ(ds.num_documents(), 3u);
  EXPECT_EQ(ds.num_tokens(), 14u);
  EXPECT_EQ(ds.min_token(), 10);
  EXPECT_EQ(ds.max_token(), 41);
  std::vector<int64_t> documents, offsets, lengths;
  for (uint64_t d = 0; d <= ds.num_documents(); ++d) documents.push_back(ds.document_index(d));
  for (uint64_t s = 0; s < ds.num_sequences(); ++s) {
    offsets.push_back(ds.sequence_offset(s));
    lengths.push_back(ds.sequence_length(s));
  }
  EXPECT_EQ(documents, (std::vector<int64_t>{0, 1, 3, 5}));
  EXPECT_EQ(offsets, (std::vector<int64_t>{0, 10, 16, 24, 24}));
  EXPECT_EQ(lengths, (std::vector<int64_t>{5, 3, 4, 0, 2}));
  EXPECT_EQ(ds.document_token_start(0), 0u);
  EXPECT_EQ(ds.document_token_start(1), 5u);
  EXPECT_EQ(ds.document_token_start(2), 12u);
  EXPECT_EQ(ds.document_token_start(3), 14u);
  EXPECT_EQ(ds.sequence(2), (std::vector<int32_t>{30, 31, 32, 33}));
  EXPECT_TRUE(ds.sequence(3).empty());
  // A window across sequence and document boundaries, through the empty sequence.
  std::vector<int32_t> window(9, -1);
  ds.read_tokens(3, 9, window.data());
  EXPECT_EQ(window, (std::vector<int32_t>{13, 14, 20, 21, 22, 30, 31, 32, 33}));
  std::vector<int32_t> tail(3, -1);
  ds.read_tokens(11, 3, tail.data());
  EXPECT_EQ(tail, (std::vector<int32_t>{33, 40, 41}));
  EXPECT_THROW(ds.read_tokens(12, 3, tail.data()), Error);
}

TEST_F(IndexedDatasetTest, ReadsEveryIntegerDtype) {
  for (const uint8_t code : {1, 2, 3, 4, 5, 8}) {
    Corpus c;
    c.code = code;
    const bool is_signed = code == 2 || code == 3 || code == 4 || code == 5;
    const int64_t big =
        code == 1 || code == 2 ? 100 : (code == 3 ? 30000 : (code == 8 ? 65000 : 2000000000));
    c.sequences = {{0, 1, big}, {is_signed ? -5 : 5, 7}};
    c.doc_index = {0, 2};
    const std::string prefix = write(c, "dtype" + std::to_string(code));
    const auto ds = IndexedDataset::open(prefix);
    EXPECT_EQ(static_cast<int>(ds.dtype()), code);
    EXPECT_EQ(ds.sequence(0), (std::vector<int32_t>{0, 1, static_cast<int32_t>(big)})) << int(code);
    EXPECT_EQ(ds.sequence(1), (std::vector<int32_t>{is_signed ? -5 : 5, 7})) << int(code);
    EXPECT_EQ(ds.max_token(), big);
    EXPECT_EQ(ds.min_token(), is_signed ? -5 : 0);
  }
}

TEST_F(IndexedDatasetTest, WriterMatchesIndependentLayoutByteForByte) {
  const Corpus c = sample_corpus();
  const std::string ours = (dir_ / "ours").string();
  IndexedDatasetWriter writer(ours, TokenDtype::uint16);
  auto to32 = [](const std::vector<int64_t>& v) {
    return std::vector<int32_t>(v.begin(), v.end());
  };
  writer.add_document(to32(c.sequences[0]));
  writer.add_sequence(to32(c.sequences[1]));
  writer.add_sequence(to32(c.sequences[2]));
  writer.end_document();
  writer.add_sequence(to32(c.sequences[3]));
  writer.add_sequence(to32(c.sequences[4]));
  writer.end_document();
  writer.finalize();
  auto read = [](const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return std::vector<uint8_t>((std::istreambuf_iterator<char>(f)),
                                std::istreambuf_iterator<char>());
  };
  EXPECT_EQ(read(ours + ".idx"), c.idx().b);
  EXPECT_EQ(read(ours + ".bin"), c.bin().b);
  EXPECT_FALSE(fs::exists(ours + ".bin.tmp"));
  // A token that does not fit the dtype is refused.
  IndexedDatasetWriter small((dir_ / "small").string(), TokenDtype::uint8);
  EXPECT_THROW(small.add_document(std::vector<int32_t>{1, 256}), Error);
}

TEST_F(IndexedDatasetTest, MissingFiles) {
  const std::string prefix = (dir_ / "nothing").string();
  expect_error(prefix, 0, {prefix + ".idx", "cannot open"});
  const std::string half = write(sample_corpus(), "half");
  fs::remove(half + ".bin");
  expect_error(half, 0, {half + ".bin", "data file", "cannot open"});
}

TEST_F(IndexedDatasetTest, WrongMagic) {
  Corpus c = sample_corpus();
  c.magic = "MMIDIDY\0\0";
  const std::string p = write(c);
  expect_error(p, 0, {p + ".idx", "wrong magic", "not a Megatron indexed dataset"});
}

TEST_F(IndexedDatasetTest, WrongVersion) {
  Corpus c = sample_corpus();
  c.version = 2;
  const std::string p = write(c);
  expect_error(p, 0, {p + ".idx", "version 2", "only version 1"});
}

TEST_F(IndexedDatasetTest, UnknownOrNonIntegerDtype) {
  for (const uint8_t code : {0, 9, 200}) {
    Corpus c = sample_corpus();
    c.code = code;
    const std::string p = write(c, "code" + std::to_string(code));
    expect_error(p, 0, {p + ".idx", "unknown token dtype code " + std::to_string(code)});
  }
  Corpus f = sample_corpus();
  f.code = 7;
  const std::string p = write(f, "float");
  expect_error(p, 0, {p + ".idx", "float32", "integer dtype"});
}

TEST_F(IndexedDatasetTest, TruncatedIndex) {
  const std::string p = write(sample_corpus());
  Bytes idx = sample_corpus().idx();
  idx.b.resize(20);  // inside the header
  write_bytes(p + ".idx", idx.b);
  expect_error(p, 0, {p + ".idx", "truncated", "header"});
  idx = sample_corpus().idx();
  idx.b.resize(idx.b.size() - 3);  // the document index is cut
  write_bytes(p + ".idx", idx.b);
  expect_error(
      p, 0, {p + ".idx", "truncated or its counts are wrong", "5 sequences", "4 document index"});
}

TEST_F(IndexedDatasetTest, CountsBeyondFileSize) {
  Corpus c = sample_corpus();
  c.seq_count = 1000000;
  std::string p = write(c, "seqs");
  expect_error(p, 0, {p + ".idx", "1000000 sequences", "truncated or its counts are wrong"});
  c = sample_corpus();
  c.doc_count = INT64_MAX;  // entries * 8 would overflow 64 bits: the size check must not
  p = write(c, "docs");
  expect_error(p, 0, {p + ".idx", "truncated or its counts are wrong"});
}

TEST_F(IndexedDatasetTest, TruncatedBin) {
  const std::string p = write(sample_corpus());
  Bytes bin = sample_corpus().bin();
  bin.b.resize(bin.b.size() - 2);  // the last token of sequence 4 is cut
  write_bytes(p + ".bin", bin.b);
  expect_error(p, 0, {p + ".bin", "is truncated", "sequence 4", "26 bytes"});
}

TEST_F(IndexedDatasetTest, NonMonotonicOrOverlappingOffsets) {
  Corpus c = sample_corpus();
  c.offsets = {0, 16, 10, 24, 24};  // sequences 1 and 2 swapped
  std::string p = write(c, "swapped");
  expect_error(p, 0, {p + ".idx", "inconsistent", "sequence 2", "offsets must increase"});
  c = sample_corpus();
  c.offsets = {0, 4, 16, 24, 24};  // sequence 1 starts inside sequence 0
  p = write(c, "overlap");
  expect_error(p, 0, {p + ".idx", "inconsistent", "sequence 1", "must not overlap"});
  c = sample_corpus();
  c.offsets = {-2, 10, 16, 24, 24};
  p = write(c, "negative");
  expect_error(p, 0, {p + ".idx", "negative"});
}

TEST_F(IndexedDatasetTest, NegativeLength) {
  Corpus c = sample_corpus();
  c.lengths = {5, 3, -4, 0, 2};
  const std::string p = write(c);
  expect_error(p, 0, {p + ".idx", "sequence 2 has negative length -4"});
}

TEST_F(IndexedDatasetTest, InconsistentDocumentIndex) {
  Corpus c = sample_corpus();
  c.doc_index = {0, 1, 3, 4};  // does not end at the sequence count 5
  std::string p = write(c, "end");
  expect_error(p, 0, {p + ".idx", "must end at the sequence count 5", "ends at 4"});
  c.doc_index = {1, 3, 5};
  p = write(c, "start");
  expect_error(p, 0, {p + ".idx", "must start at 0"});
  c.doc_index = {0, 3, 1, 5};
  p = write(c, "decreasing");
  expect_error(p, 0, {p + ".idx", "must not decrease"});
  c.doc_index = {};
  p = write(c, "empty");
  expect_error(p, 0, {p + ".idx", "document index is empty"});
}

TEST_F(IndexedDatasetTest, TokenIdOutsideVocabulary) {
  Corpus c = sample_corpus();
  c.sequences[2][1] = 150;  // sequence 2, position 1
  const std::string p = write(c);
  expect_error(p, 100, {p + ".bin", "token id 150", "sequence 2, position 1", "vocab_size=100"});
  EXPECT_NO_THROW(IndexedDataset::open(p, 151));
  EXPECT_NO_THROW(IndexedDataset::open(p, 0));  // no vocabulary: only the range is reported
  Corpus neg = sample_corpus();
  neg.code = 3;  // int16
  neg.sequences[0][0] = -1;
  const std::string q = write(neg, "negative");
  expect_error(q, 100, {q + ".bin", "token id -1", "sequence 0, position 0"});
}

TEST_F(IndexedDatasetTest, EmptyCorpusIsValid) {
  Corpus c;
  c.doc_index = {0};
  const std::string p = write(c);
  const auto ds = IndexedDataset::open(p, 10);
  EXPECT_EQ(ds.num_sequences(), 0u);
  EXPECT_EQ(ds.num_documents(), 0u);
  EXPECT_EQ(ds.num_tokens(), 0u);
}

// A corpus of many documents: the .idx's arrays are read in place, never copied. They held 28 bytes a sequence of
// each process's heap (10^9 documents: 28 GB a rank, twice where the validation split opens the corpus again);
// 2M sequences took 56 MB here.
TEST_F(IndexedDatasetTest, ManyDocumentsTakeNoHeapForTheIndex) {
  constexpr uint64_t kDocuments = 2'000'000;
  const std::string prefix = (dir_ / "many").string();
  {
    IndexedDatasetWriter writer(prefix, TokenDtype::uint16);
    for (uint64_t d = 0; d < kDocuments; ++d) {
      const int32_t tokens[2] = {static_cast<int32_t>(d % 1000), static_cast<int32_t>(d % 7)};
      writer.add_document(std::span<const int32_t>(tokens, 1 + d % 2));
    }
    writer.finalize();
  }
  const int64_t before = test::resident_anonymous_bytes();
  if (before < 0) GTEST_SKIP() << "no RssAnon in /proc/self/status";
  const auto ds = IndexedDataset::open(prefix, 1000);
  const int64_t grown = test::resident_anonymous_bytes() - before;
  if (!test::kSanitizedAllocator) {  // a sanitizer's allocator and shadow take memory of their own
    EXPECT_LT(grown, 8 << 20) << "opening " << kDocuments << " documents took " << grown << " bytes of heap";
  }
  EXPECT_EQ(ds.num_documents(), kDocuments);
  EXPECT_EQ(ds.num_tokens(), kDocuments / 2 * 3);
  EXPECT_EQ(ds.document_token_start(kDocuments - 1), (kDocuments - 1) / 2 * 3 + 1);  // 1 token even, 2 odd
  EXPECT_EQ(ds.sequence(kDocuments - 1), (std::vector<int32_t>{static_cast<int32_t>((kDocuments - 1) % 1000),
                                                               static_cast<int32_t>((kDocuments - 1) % 7)}));
  std::vector<int32_t> window(4, -1);
  ds.read_tokens(ds.num_tokens() - 4, 4, window.data());
  const uint64_t a = kDocuments - 2, b = kDocuments - 1;  // the last token of a - 1, a (1 token), b (2 tokens)
  EXPECT_EQ(window, (std::vector<int32_t>{static_cast<int32_t>((a - 1) % 7), static_cast<int32_t>(a % 1000),
                                          static_cast<int32_t>(b % 1000), static_cast<int32_t>(b % 7)}));
}

}  // namespace
}  // namespace sg::data
