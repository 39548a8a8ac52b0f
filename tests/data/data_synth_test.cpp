// The synthetic corpus: deterministic, every document follows its task's grammar (so it is
// learnable), its context-aware entropy is far below its unigram entropy, and it reads back through
// the indexed-dataset reader.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "data/indexed_dataset.h"
#include "data/synth_corpus.h"

namespace sg::data {
namespace {

namespace fs = std::filesystem;

std::vector<std::vector<int32_t>> generate(uint64_t tokens, uint64_t seed,
                                           SynthSummary* summary = nullptr) {
  std::vector<std::vector<int32_t>> docs;
  SynthOptions o;
  o.num_tokens = tokens;
  o.seed = seed;
  const SynthSummary s = generate_synth_corpus(
      o, [&](std::span<const int32_t> d) { docs.emplace_back(d.begin(), d.end()); });
  if (summary != nullptr) *summary = s;
  return docs;
}

bool is_symbol(int32_t t) { return t >= kSynthSymbol0 && t < kSynthSymbol0 + kSynthNumSymbols; }

// Reads a decimal number of digit tokens starting at doc[i]; advances i.
int64_t read_number(const std::vector<int32_t>& doc, size_t& i) {
  int64_t v = 0;
  size_t start = i;
  while (i < doc.size() && doc[i] >= kSynthDigit0 && doc[i] < kSynthDigit0 + 10)
    v = v * 10 + (doc[i++] - kSynthDigit0);
  EXPECT_GT(i, start) << "expected digits";
  return v;
}

// Checks one document against its task grammar; returns its task index.
int check_document(const std::vector<int32_t>& doc) {
  EXPECT_GE(doc.size(), 3u);
  EXPECT_EQ(doc.back(), kSynthEod);
  for (size_t i = 0; i + 1 < doc.size(); ++i) EXPECT_NE(doc[i], kSynthEod) << "EOD only at the end";
  const std::vector<int32_t> body(doc.begin() + 1, doc.end() - 1);
  switch (doc[0]) {
    case kSynthTaskCount: {
      EXPECT_GE(body.size(), 12u);
      EXPECT_LE(body.size(), 40u);
      const int32_t step =
          ((body[1] - body[0]) % kSynthNumSymbols + kSynthNumSymbols) % kSynthNumSymbols;
      EXPECT_GE(step, 1);
      EXPECT_LE(step, 3);
      for (size_t i = 0; i < body.size(); ++i) {
        EXPECT_TRUE(is_symbol(body[i]));
        if (i > 0) {
          EXPECT_EQ(body[i],
                    kSynthSymbol0 + (body[i - 1] - kSynthSymbol0 + step) % kSynthNumSymbols);
        }
      }
      return 0;
    }
    case kSynthTaskRepeat: {
      size_t m = 0;
      while (m < body.size() && body[m] != kSynthSeparator) ++m;
      EXPECT_GE(m, 2u);
      EXPECT_LE(m, 8u);
      EXPECT_EQ((body.size() + 1) % (m + 1), 0u) << "whole repeats separated by '|'";
      const size_t repeats = (body.size() + 1) / (m + 1);
      EXPECT_GE(repeats, 2u);
      EXPECT_LE(repeats, 6u);
      for (size_t i = 0; i < body.size(); ++i) {
        if (i % (m + 1) == m) {
          EXPECT_EQ(body[i], kSynthSeparator);
        } else {
          EXPECT_TRUE(is_symbol(body[i]));
          EXPECT_EQ(body[i], body[i % (m + 1)]);
        }
      }
      return 1;
    }
    case kSynthTaskAdd: {
      size_t i = 0;
      int equations = 0;
      while (i < body.size()) {
        const int64_t a = read_number(body, i);
        EXPECT_EQ(body[i++], kSynthPlus);
        const int64_t b = read_number(body, i);
        EXPECT_EQ(body[i++], kSynthEquals);
        const int64_t c = read_number(body, i);
        EXPECT_EQ(body[i++], kSynthEquationEnd);
        EXPECT_LE(a, 999);
        EXPECT_LE(b, 999);
        EXPECT_EQ(a + b, c);
        ++equations;
      }
      EXPECT_GE(equations, 1);
      EXPECT_LE(equations, 4);
      return 2;
    }
    default:
      ADD_FAILURE() << "unknown task marker " << doc[0];
      return -1;
  }
}

TEST(SynthCorpus, DeterministicPerSeed) {
  EXPECT_EQ(generate(5000, 11), generate(5000, 11));
  EXPECT_NE(generate(5000, 11), generate(5000, 12));
}

TEST(SynthCorpus, EveryDocumentFollowsItsTask) {
  SynthSummary s;
  const auto docs = generate(200000, 5, &s);
  uint64_t per_task[3] = {0, 0, 0};
  uint64_t tokens = 0;
  for (const auto& d : docs) {
    const int task = check_document(d);
    if (task >= 0) ++per_task[task];
    tokens += d.size();
    if (::testing::Test::HasFailure()) return;  // one bad document is enough to report
  }
  EXPECT_EQ(s.num_documents, docs.size());
  EXPECT_EQ(s.num_tokens, tokens);
  EXPECT_GE(tokens, 200000u);
  for (int t = 0; t < 3; ++t) {
    EXPECT_EQ(s.documents_per_task[t], per_task[t]);
    EXPECT_NEAR(static_cast<double>(per_task[t]) / docs.size(), 1.0 / 3.0, 0.03)
        << "tasks are balanced";
  }
}

TEST(SynthCorpus, ContextMakesItFarMorePredictableThanUnigram) {
  SynthSummary s;
  const auto docs = generate(300000, 1234, &s);
  // Unigram and bigram statistics recomputed here from the documents.
  std::vector<double> unigram(kSynthVocabSize, 0.0);
  std::map<std::pair<int32_t, int32_t>, double> bigram;
  std::vector<double> prev_count(kSynthVocabSize, 0.0);
  int32_t prev = kSynthEod;
  double n = 0.0;
  for (const auto& d : docs) {
    for (const int32_t t : d) {
      ASSERT_GE(t, 0);
      ASSERT_LT(t, kSynthVocabSize);
      unigram[t] += 1.0;
      bigram[{prev, t}] += 1.0;
      prev_count[prev] += 1.0;
      prev = t;
      n += 1.0;
    }
  }
  double h1 = 0.0;
  for (const double c : unigram)
    if (c > 0) h1 -= c / n * std::log(c / n);
  double h2 = 0.0;  // H(next | previous token)
  for (const auto& [k, c] : bigram) h2 -= c / n * std::log(c / prev_count[k.first]);
  EXPECT_NEAR(s.unigram_entropy_nats, h1, 1e-9);
  EXPECT_GT(h1, 4.0) << "a context-free model has a high loss";
  EXPECT_LT(h2, h1 - 1.5) << "one token of context already removes > 1.5 nats";
  EXPECT_LT(s.entropy_rate_nats, h1 - 3.0) << "full context leaves a small floor";
  EXPECT_GT(s.entropy_rate_nats, 0.3);
  EXPECT_LT(s.entropy_rate_nats, h2);
}

TEST(SynthCorpus, WrittenCorpusReadsBack) {
  const std::string prefix =
      (fs::temp_directory_path() / ("sg_synth_test_" + std::to_string(::getpid()))).string();
  SynthOptions o;
  o.num_tokens = 30000;
  o.seed = 9;
  const SynthSummary s = write_synth_corpus(prefix, o);
  const auto docs = generate(30000, 9);
  const auto ds = IndexedDataset::open(prefix, kSynthVocabSize);
  EXPECT_EQ(ds.dtype(), TokenDtype::uint16);
  EXPECT_EQ(ds.num_documents(), docs.size());
  EXPECT_EQ(ds.num_sequences(), docs.size());
  EXPECT_EQ(ds.num_tokens(), s.num_tokens);
  EXPECT_EQ(ds.min_token(), 0);
  EXPECT_LT(ds.max_token(), kSynthVocabSize);
  for (size_t d = 0; d < docs.size(); ++d) ASSERT_EQ(ds.sequence(d), docs[d]) << "document " << d;
  fs::remove(prefix + ".bin");
  fs::remove(prefix + ".idx");
}

}  // namespace
}  // namespace sg::data
