#pragma once
// A learnable synthetic corpus (the embedded default data of the demo recipe): documents of simple
// algorithmic tasks over a 256-token vocabulary, so a small Llama's loss falls clearly below the
// corpus's unigram entropy within a few hundred steps. Every document is
//   <task marker> <body> <EOD>
// with one of three tasks, chosen uniformly:
//   count   a run of symbols s, s+d, s+2d, ... (mod the symbol range), d in {1,2,3}:
//   bigram-learnable repeat  a random motif of 2-8 symbols repeated 2-6 times, separated by '|':
//   needs induction heads add     1-4 equations "a+b=c;" with a, b in [0, 999] in decimal digits:
//   the sums are determined
// Because each document is a function of its random choices and those choices are recoverable from
// it, the generator's entropy (sum of log(options) over all choices) divided by the token count is
// the entropy rate of the corpus: a floor no model can beat on fresh data. It is reported next to
// the unigram entropy.
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

namespace sg::data {

inline constexpr int64_t kSynthVocabSize = 256;
inline constexpr int32_t kSynthEod = 0;        // end of document (appended like --append-eod)
inline constexpr int32_t kSynthTaskCount = 1;  // task markers
inline constexpr int32_t kSynthTaskRepeat = 2;
inline constexpr int32_t kSynthTaskAdd = 3;
inline constexpr int32_t kSynthSeparator = 8;     // '|' between motif repeats
inline constexpr int32_t kSynthPlus = 9;          // '+'
inline constexpr int32_t kSynthEquals = 10;       // '='
inline constexpr int32_t kSynthEquationEnd = 11;  // ';'
inline constexpr int32_t kSynthDigit0 = 16;       // digits 16..25
inline constexpr int32_t kSynthSymbol0 = 32;      // symbols 32..255
inline constexpr int32_t kSynthNumSymbols = 224;

struct SynthOptions {
  uint64_t num_tokens = uint64_t{1} << 22;  // at least this many tokens (whole documents)
  uint64_t seed = 1234;
  bool replace_existing = false;  // write_synth_corpus: replace PREFIX.bin/.idx that exist (`data synth --force`)
};

struct SynthSummary {
  uint64_t num_documents = 0;
  uint64_t num_tokens = 0;
  uint64_t documents_per_task[3] = {0, 0, 0};  // count, repeat, add
  std::vector<uint64_t> token_counts;          // [kSynthVocabSize]
  double unigram_entropy_nats = 0.0;
  double entropy_rate_nats = 0.0;  // generator entropy per token: the loss floor

  uint64_t distinct_tokens() const;
  nlohmann::json to_json() const;
  std::string to_text() const;  // a few lines for `stepgraph data synth`
};

// Entropy in nats of the distribution given by `counts` (zero counts ignored).
double unigram_entropy_nats(std::span<const uint64_t> counts);

// Generates documents and hands each to `sink` (tests use this without files).
SynthSummary generate_synth_corpus(const SynthOptions& options,
                                   const std::function<void(std::span<const int32_t>)>& sink);

// Writes PREFIX.bin / PREFIX.idx (uint16 tokens, one sequence per document) and returns the
// summary. sg::Error naming them when either exists, unless options.replace_existing. The files are written
// as PREFIX.{bin,idx}.tmp and renamed into place at the end (IndexedDatasetWriter): an error or a crash
// leaves no half-written dataset under the final names.
SynthSummary write_synth_corpus(const std::string& prefix, const SynthOptions& options);

}  // namespace sg::data
