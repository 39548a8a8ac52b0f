#include "data/synth_corpus.h"

#include <cmath>
#include <filesystem>

#include "core/error.h"
#include "core/strings.h"
#include "data/indexed_dataset.h"
#include "data/shuffle.h"

namespace sg::data {

namespace {

// Draws random choices and keeps the generator's entropy: each uniform choice among n options
// contributes log(n) nats.
class ChoiceSource {
 public:
  explicit ChoiceSource(uint64_t seed) : rng_(seed) {}
  int64_t between(int64_t lo, int64_t hi) {
    entropy_ += std::log(static_cast<double>(hi - lo + 1));
    return rng_.between(lo, hi);
  }
  double entropy() const { return entropy_; }

 private:
  SplitMix64 rng_;
  double entropy_ = 0.0;
};

int32_t symbol(int64_t i) {
  return kSynthSymbol0 +
         static_cast<int32_t>(((i % kSynthNumSymbols) + kSynthNumSymbols) % kSynthNumSymbols);
}

void append_number(std::vector<int32_t>& doc, int64_t value) {
  const std::string digits = std::to_string(value);
  for (const char c : digits) doc.push_back(kSynthDigit0 + (c - '0'));
}

// One document into `doc`; returns the task index (0 count, 1 repeat, 2 add).
int make_document(ChoiceSource& choices, std::vector<int32_t>& doc) {
  doc.clear();
  const int task = static_cast<int>(choices.between(0, 2));
  switch (task) {
    case 0: {
      doc.push_back(kSynthTaskCount);
      const int64_t start = choices.between(0, kSynthNumSymbols - 1);
      const int64_t step = choices.between(1, 3);
      const int64_t length = choices.between(12, 40);
      for (int64_t i = 0; i < length; ++i) doc.push_back(symbol(start + i * step));
      break;
    }
    case 1: {
      doc.push_back(kSynthTaskRepeat);
      const int64_t motif_length = choices.between(2, 8);
      std::vector<int32_t> motif(static_cast<size_t>(motif_length));
      for (auto& m : motif) m = symbol(choices.between(0, kSynthNumSymbols - 1));
      const int64_t repeats = choices.between(2, 6);
      for (int64_t r = 0; r < repeats; ++r) {
        if (r > 0) doc.push_back(kSynthSeparator);
        doc.insert(doc.end(), motif.begin(), motif.end());
      }
      break;
    }
    default: {
      doc.push_back(kSynthTaskAdd);
      const int64_t equations = choices.between(1, 4);
      for (int64_t e = 0; e < equations; ++e) {
        const int64_t a = choices.between(0, 999);
        const int64_t b = choices.between(0, 999);
        append_number(doc, a);
        doc.push_back(kSynthPlus);
        append_number(doc, b);
        doc.push_back(kSynthEquals);
        append_number(doc, a + b);
        doc.push_back(kSynthEquationEnd);
      }
      break;
    }
  }
  doc.push_back(kSynthEod);
  return task;
}

}  // namespace

double unigram_entropy_nats(std::span<const uint64_t> counts) {
  double total = 0.0;
  for (const uint64_t c : counts) total += static_cast<double>(c);
  if (total == 0.0) return 0.0;
  double h = 0.0;
  for (const uint64_t c : counts) {
    if (c == 0) continue;
    const double p = static_cast<double>(c) / total;
    h -= p * std::log(p);
  }
  return h;
}

uint64_t SynthSummary::distinct_tokens() const {
  uint64_t n = 0;
  for (const uint64_t c : token_counts) n += c > 0 ? 1 : 0;
  return n;
}

nlohmann::json SynthSummary::to_json() const {
  return nlohmann::json{
      {"documents", num_documents},
      {"tokens", num_tokens},
      {"documents_per_task",
       {{"count", documents_per_task[0]},
        {"repeat", documents_per_task[1]},
        {"add", documents_per_task[2]}}},
      {"vocab_size", kSynthVocabSize},
      {"distinct_tokens", distinct_tokens()},
      {"unigram_entropy_nats", unigram_entropy_nats},
      {"entropy_rate_nats", entropy_rate_nats},
  };
}

std::string SynthSummary::to_text() const {
  return strprintf(
      "documents: %llu (count %llu, repeat %llu, add %llu)\n"
      "tokens: %llu (uint16), ids < %lld, %llu distinct\n"
      "unigram entropy: %.4f nats/token (the loss of a model that ignores context; training should "
      "fall clearly below it)\n"
      "generator entropy: %.4f nats/token (the floor: no model can do better on fresh data)\n",
      static_cast<unsigned long long>(num_documents),
      static_cast<unsigned long long>(documents_per_task[0]),
      static_cast<unsigned long long>(documents_per_task[1]),
      static_cast<unsigned long long>(documents_per_task[2]),
      static_cast<unsigned long long>(num_tokens), static_cast<long long>(kSynthVocabSize),
      static_cast<unsigned long long>(distinct_tokens()), unigram_entropy_nats, entropy_rate_nats);
}

SynthSummary generate_synth_corpus(const SynthOptions& options,
                                   const std::function<void(std::span<const int32_t>)>& sink) {
  if (options.num_tokens == 0) throw Error("data synth: --tokens must be positive");
  SynthSummary summary;
  summary.token_counts.assign(kSynthVocabSize, 0);
  ChoiceSource choices(mix_seed(options.seed, 0x73796e7468ull /* "synth" */));
  std::vector<int32_t> doc;
  while (summary.num_tokens < options.num_tokens) {
    const int task = make_document(choices, doc);
    ++summary.documents_per_task[task];
    ++summary.num_documents;
    summary.num_tokens += doc.size();
    for (const int32_t t : doc) ++summary.token_counts[static_cast<size_t>(t)];
    sink(doc);
  }
  summary.unigram_entropy_nats = unigram_entropy_nats(summary.token_counts);
  summary.entropy_rate_nats = choices.entropy() / static_cast<double>(summary.num_tokens);
  return summary;
}

SynthSummary write_synth_corpus(const std::string& prefix, const SynthOptions& options) {
  // A prefix that already holds a dataset (a corpus from tools/preprocess_data.py, hours of work) is not
  // replaced by a mistyped --out. symlink_status: a link, even a dangling one, would be replaced too.
  if (!options.replace_existing) {
    std::vector<std::string> existing;
    for (const std::string& path : {bin_path(prefix), index_path(prefix)}) {
      std::error_code ec;
      if (std::filesystem::exists(std::filesystem::symlink_status(path, ec))) existing.push_back(path);
    }
    if (!existing.empty()) {
      throw Error(strprintf("data synth --out %s: %s already exist%s; the synthetic corpus would replace %s. Give "
                            "another --out, or add --force to replace %s",
                            prefix.c_str(), join(existing, " and ").c_str(), existing.size() == 1 ? "s" : "",
                            existing.size() == 1 ? "it" : "them", existing.size() == 1 ? "it" : "them"));
    }
  }
  IndexedDatasetWriter writer(prefix, token_dtype_for_vocab(kSynthVocabSize));
  SynthSummary summary = generate_synth_corpus(
      options, [&](std::span<const int32_t> doc) { writer.add_document(doc); });
  writer.finalize();
  return summary;
}

}  // namespace sg::data
