#include "data/blended_dataset.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <mutex>
#include <numeric>

#include "core/error.h"
#include "core/strings.h"
#include "data/mock_dataset.h"
#include "data/shuffle.h"

namespace sg::data {

namespace {

// True when `text` is a number as a whole (out-of-range values included: "1e-320" and "1e400"
// are numbers, the caller judges their size); `value` holds what strtod made of it.
bool parse_number(const std::string& text, double& value) {
  if (text.empty()) return false;
  char* end = nullptr;
  value = std::strtod(text.c_str(), &end);
  const bool spelled_as_number = std::isdigit(static_cast<unsigned char>(text[0])) || text[0] == '.' ||
                                 text[0] == '-' || text[0] == '+';
  return spelled_as_number && end == text.c_str() + text.size() && !std::isnan(value);
}

// A blend weight: finite, >= 0, and either a written zero or a normal double (a weight so small it
// underflows would silently count as 0 or lose its ratio to the others).
bool usable_weight(const std::string& text, double w) {
  if (!std::isfinite(w) || w < 0.0) return false;
  if (w != 0.0) return std::isnormal(w);
  const std::string mantissa = text.substr(0, text.find_first_of("eE"));
  return mantissa.find_first_of("123456789") == std::string::npos;  // "0", "0.0", "0e5"
}

bool ends_with(const std::string& text, const std::string& suffix) {
  return text.size() > suffix.size() && text.compare(text.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// How to make the dataset PREFIX: stepgraph data synth, or the tokenizer + preprocess_data.py path
// (whose --output-prefix P writes P_text_document, so a PREFIX ending in _text_document is made from P).
std::string how_to_make(const std::string& prefix) {
  const std::string document = "_text_document";
  const std::string output_prefix =
      ends_with(prefix, document) ? prefix.substr(0, prefix.size() - document.size()) : prefix;
  return strprintf(
      "A dataset is a Megatron .bin/.idx pair; make one with\n"
      "  stepgraph data synth --out %s          (the synthetic demo corpus, 256-token vocabulary)\n"
      "or from your own text (README \"Your own data\"):\n"
      "  python3 tools/train_tokenizer.py --input FILE.jsonl --vocab-size 8000 --output TOKENIZER_DIR\n"
      "  python3 tools/preprocess_data.py --input FILE.jsonl --json-keys text --output-prefix %s "
      "--tokenizer-type HuggingFaceTokenizer --tokenizer-model TOKENIZER_DIR --append-eod\n"
      "  (then dataset.data_path=[%s_text_document])",
      prefix.c_str(), output_prefix.c_str(), output_prefix.c_str());
}

// The datasets this process's loaders hold open, by prefix and vocab_size: a second loader of one corpus (training's
// and dataset.split's validation loader) reads the one open copy instead of mapping and scanning the files again.
class OpenDatasets {
 public:
  std::shared_ptr<const IndexedDataset> find(const std::string& prefix, int64_t vocab_size) {
    std::lock_guard<std::mutex> lock(mutex_);
    const auto it = open_.find({prefix, vocab_size});
    return it == open_.end() ? nullptr : it->second.lock();
  }
  // Where another loader opened the same corpus meanwhile (threads standing for ranks in the tests), its copy is
  // kept and returned: every holder then shares one, which stays open while any of them holds it.
  std::shared_ptr<const IndexedDataset> open(const std::string& prefix, int64_t vocab_size, const ScanShare& share) {
    auto dataset = std::make_shared<const IndexedDataset>(IndexedDataset::open(prefix, vocab_size, share));
    std::lock_guard<std::mutex> lock(mutex_);
    std::erase_if(open_, [](const auto& entry) { return entry.second.expired(); });
    auto& entry = open_[{prefix, vocab_size}];
    if (auto kept = entry.lock()) return kept;
    entry = dataset;
    return dataset;
  }

 private:
  std::mutex mutex_;
  std::map<std::pair<std::string, int64_t>, std::weak_ptr<const IndexedDataset>> open_;
};

OpenDatasets& open_datasets() {
  static OpenDatasets datasets;
  return datasets;
}

}  // namespace

void check_dataset_exists(const std::string& prefix) {
  std::error_code ec;
  const auto is_file = [&ec](const std::string& path) { return std::filesystem::is_regular_file(path, ec); };
  const bool idx = is_file(index_path(prefix));
  const bool bin = is_file(bin_path(prefix));
  if (idx && bin) return;
  const std::string missing = !idx && !bin ? index_path(prefix) + " and " + bin_path(prefix)
                                           : (!idx ? index_path(prefix) : bin_path(prefix));
  // One of the pair's files named instead of the prefix (a shell completes data/x.bin): the prefix is
  // that name without its suffix. (A prefix that itself ends in .bin, with both files, returned above.)
  for (const std::string suffix : {".bin", ".idx"}) {
    if (!ends_with(prefix, suffix) || !is_file(prefix)) continue;
    const std::string stem = prefix.substr(0, prefix.size() - suffix.size());
    const bool stem_idx = is_file(index_path(stem)), stem_bin = is_file(bin_path(stem));
    const std::string name_it = strprintf(
        "give the dataset's prefix, without %s: it names both files PREFIX.bin and PREFIX.idx "
        "(in a config dataset.data_path=[%s], on the command line stepgraph data inspect %s)",
        suffix.c_str(), stem.c_str(), stem.c_str());
    if (stem_idx && stem_bin) {
      throw Error(strprintf("dataset %s: %s not found: %s is a file of the dataset %s; %s", prefix.c_str(),
                            missing.c_str(), prefix.c_str(), stem.c_str(), name_it.c_str()));
    }
    throw Error(strprintf("dataset %s: %s not found: %s is a file of the dataset %s, but %s is missing, so "
                          "make that dataset again, then %s. %s",
                          prefix.c_str(), missing.c_str(), prefix.c_str(), stem.c_str(),
                          (stem_idx ? bin_path(stem) : index_path(stem)).c_str(), name_it.c_str(),
                          how_to_make(stem).c_str()));
  }
  std::string hint;
  if (!ends_with(prefix, "_text_document") && is_file(index_path(prefix + "_text_document"))) {
    hint = strprintf(" (%s_text_document exists: tools/preprocess_data.py names its output "
                     "PREFIX_<json key>_document)",
                     prefix.c_str());
  }
  // What a writer killed between its renames (or before them) leaves: say so rather than only "missing".
  for (const std::string& tmp : {index_path(prefix) + ".tmp", bin_path(prefix) + ".tmp"}) {
    if (is_file(tmp)) {
      hint += strprintf(" (%s is left from a write of %s that did not finish, a crash or a kill: write the "
                        "dataset again)",
                        tmp.c_str(), prefix.c_str());
      break;
    }
  }
  // A prefix spelled like a file (PREFIX.bin) names PREFIX.bin.bin: the advice is for PREFIX.
  std::string make_for = prefix;
  for (const std::string suffix : {".bin", ".idx"}) {
    if (!ends_with(prefix, suffix)) continue;
    make_for = prefix.substr(0, prefix.size() - suffix.size());
    hint += strprintf(" (a dataset is named by its prefix, without %s: %s names the files %s and %s)", suffix.c_str(),
                      make_for.c_str(), bin_path(make_for).c_str(), index_path(make_for).c_str());
  }
  throw Error(strprintf("dataset %s: %s not found%s. %s", prefix.c_str(), missing.c_str(), hint.c_str(),
                        how_to_make(make_for).c_str()));
}

std::vector<WeightedPrefix> parse_data_path(const std::vector<std::string>& data_path, const std::string& key) {
  const char* k = key.c_str();
  if (data_path.empty()) {
    throw Error(
        strprintf("%s is empty: give a list of indexed-dataset prefixes (PREFIX for PREFIX.bin/PREFIX.idx), "
                  "optionally weighted [\"0.3\", \"a\", \"0.7\", \"b\"], or set dataset.mock: true",
                  k));
  }
  std::vector<WeightedPrefix> out;
  double first = 0.0;
  if (data_path.size() == 1 || !parse_number(data_path[0], first)) {
    for (const auto& prefix : data_path) {
      double ignored = 0.0;
      if (data_path.size() > 1 && parse_number(prefix, ignored)) {
        throw Error(
            strprintf("%s mixes prefixes and weights: entry \"%s\" is a number "
                      "but the list does not start with a weight; write [\"w1\", \"prefix1\", "
                      "\"w2\", \"prefix2\", ...] or prefixes only",
                      k, prefix.c_str()));
      }
      out.push_back({prefix, -1.0});
    }
    if (out.size() == 1) out[0].weight = 1.0;
    return out;
  }
  if (data_path.size() % 2 != 0) {
    throw Error(
        strprintf("%s starts with a weight (\"%s\") but has %zu entries; a "
                  "weighted blend is pairs [\"w1\", \"prefix1\", \"w2\", \"prefix2\", ...]",
                  k, data_path[0].c_str(), data_path.size()));
  }
  double total = 0.0;
  for (size_t i = 0; i < data_path.size(); i += 2) {
    double w = 0.0;
    if (!parse_number(data_path[i], w) || w < 0.0) {
      throw Error(
          strprintf("%s[%zu] = \"%s\" should be a non-negative weight (pairs "
                    "[\"w1\", \"prefix1\", ...])",
                    k, i, data_path[i].c_str()));
    }
    if (!usable_weight(data_path[i], w)) {
      throw Error(strprintf("%s[%zu] = \"%s\" is %s for a double; only the ratios of the "
                            "weights matter, so scale them all to a range such as 0.001 to 1000",
                            k, i, data_path[i].c_str(), std::isfinite(w) ? "too small" : "too large"));
    }
    double ignored = 0.0;
    if (parse_number(data_path[i + 1], ignored)) {
      throw Error(
          strprintf("%s[%zu] = \"%s\" should be a dataset prefix, not a number "
                    "(pairs [\"w1\", \"prefix1\", ...])",
                    k, i + 1, data_path[i + 1].c_str()));
    }
    total += w;
    out.push_back({data_path[i + 1], w});
  }
  if (!std::isfinite(total)) {
    throw Error(strprintf("%s: the blend weights sum to more than the largest double (1.8e308), so they cannot be "
                          "normalised; only their ratios matter: scale them down (e.g. to 0.3 and 0.7)",
                          k));
  }
  if (!(total > 0.0))
    throw Error(strprintf("%s: the blend weights sum to 0; give a positive weight", k));
  return out;
}

nlohmann::json DataPosition::to_json() const {
  return nlohmann::json{{"consumed_samples", consumed_samples}, {"per_source", per_source}};
}

DataPosition DataPosition::from_json(const nlohmann::json& j) {
  const bool ok = j.is_object() && j.contains("consumed_samples") &&
                  j["consumed_samples"].is_number_unsigned() && j.contains("per_source") &&
                  j["per_source"].is_array();
  if (!ok) {
    throw Error(
        "data position is malformed: expected {\"consumed_samples\": N, \"per_source\": [..]}, "
        "got " +
        j.dump());
  }
  DataPosition p;
  p.consumed_samples = j["consumed_samples"].get<uint64_t>();
  for (const auto& v : j["per_source"]) {
    if (!v.is_number_unsigned())
      throw Error("data position per_source holds a non-count: " + j.dump());
    p.per_source.push_back(v.get<uint64_t>());
  }
  return p;
}

// ---------------------------------------------------------------------------------------------

namespace {

struct TokenRange {
  uint64_t begin = 0, end = 0;
};

// The token stream positions of a document range (clamped to the dataset's documents).
TokenRange token_range(const IndexedDataset& dataset, const DocumentRange& documents) {
  const uint64_t last = std::min(documents.last, dataset.num_documents());
  const uint64_t first = std::min(documents.first, last);
  return {dataset.document_token_start(first), dataset.document_token_start(last)};
}

// Windows of seq_length + 1 tokens (sharing one) in the range; TooFewTokensError when there is none.
uint64_t windows_in(const IndexedDataset& dataset, int64_t seq_length, const DocumentRange& documents) {
  const TokenRange range = token_range(dataset, documents);
  const uint64_t tokens = range.end - range.begin;
  const uint64_t needed = static_cast<uint64_t>(seq_length) + 1;
  if (tokens < needed) {
    const std::string part = documents.label.empty() ? std::string() : strprintf(" (%s)", documents.label.c_str());
    throw TooFewTokensError(strprintf(
        "dataset %s%s has %llu tokens; one sample needs seq_length + 1 = %llu. Use a "
        "larger corpus, a shorter model.seq_length%s",
        dataset.prefix().c_str(), part.c_str(), static_cast<unsigned long long>(tokens),
        static_cast<unsigned long long>(needed), documents.label.empty() ? "" : " or a larger share in dataset.split"));
  }
  return (tokens - 1) / static_cast<uint64_t>(seq_length);
}

// The documents of options.split in `dataset` (all of them without split_shares), labelled for messages.
DocumentRange split_range(const DataLoaderOptions& options, const IndexedDataset& dataset) {
  if (!options.split_shares) return {};
  const auto bounds = split_document_bounds(*options.split_shares, dataset.num_documents());
  const auto s = static_cast<size_t>(options.split);
  return {bounds[s], bounds[s + 1],
          strprintf("%s split: documents [%llu, %llu) of %llu", split_name(options.split),
                    static_cast<unsigned long long>(bounds[s]), static_cast<unsigned long long>(bounds[s + 1]),
                    static_cast<unsigned long long>(dataset.num_documents()))};
}

}  // namespace

uint64_t samples_per_epoch(const DataLoaderOptions& options) {
  if (options.mock) throw Error("mock data is an endless stream: it has no epoch");
  if (options.seq_length <= 0) {
    throw Error(strprintf("data: seq_length must be positive (got %lld)", static_cast<long long>(options.seq_length)));
  }
  uint64_t samples = 0;
  const std::vector<WeightedPrefix> blend = parse_data_path(options.data_path, options.data_path_key);
  for (const WeightedPrefix& p : blend) {
    if (blend.size() > 1 && p.weight >= 0.0) {  // one dataset alone is all of the stream, whatever its weight
      throw Error(options.data_path_key +
                  " is a weighted blend: its samples follow the weights, so it has no epoch to count");
    }
    check_dataset_exists(p.prefix);
    const IndexedDataset dataset = IndexedDataset::open_index(p.prefix);
    samples += windows_in(dataset, options.seq_length, split_range(options, dataset));
  }
  return samples;
}

IndexedSampleSource::IndexedSampleSource(IndexedDataset dataset, int64_t seq_length, uint64_t seed, uint64_t source_id,
                                         const DocumentRange& documents)
    : IndexedSampleSource(std::make_shared<const IndexedDataset>(std::move(dataset)), seq_length, seed, source_id,
                          documents) {}

IndexedSampleSource::IndexedSampleSource(std::shared_ptr<const IndexedDataset> dataset, int64_t seq_length,
                                         uint64_t seed, uint64_t source_id, const DocumentRange& documents)
    : dataset_(std::move(dataset)),
      seq_length_(seq_length),
      seed_(seed),
      source_id_(source_id),
      range_label_(documents.label) {
  const TokenRange range = token_range(*dataset_, documents);
  token_begin_ = range.begin;
  token_end_ = range.end;
  windows_ = windows_in(*dataset_, seq_length, documents);
}

std::string IndexedSampleSource::describe() const {
  if (!range_label_.empty()) {
    return strprintf("%s (%s): %llu tokens (%s), %llu samples per epoch", dataset_->prefix().c_str(),
                     range_label_.c_str(), static_cast<unsigned long long>(num_tokens()),
                     token_dtype_name(dataset_->dtype()), static_cast<unsigned long long>(windows_));
  }
  return strprintf("%s: %llu documents, %llu tokens (%s), %llu samples per epoch", dataset_->prefix().c_str(),
                   static_cast<unsigned long long>(dataset_->num_documents()),
                   static_cast<unsigned long long>(dataset_->num_tokens()), token_dtype_name(dataset_->dtype()),
                   static_cast<unsigned long long>(windows_));
}

void IndexedSampleSource::sample(uint64_t index, int32_t* out) {
  const uint64_t epoch = index / windows_;
  if (epoch != cached_epoch_) {
    const uint64_t epoch_seed = mix_seed(seed_, source_id_, epoch);
    if (windows_ <= uint64_t{1} << 32) {
      order32_ = seeded_permutation<uint32_t>(windows_, epoch_seed);
    } else {
      order_ = seeded_permutation(windows_, epoch_seed);
    }
    cached_epoch_ = epoch;
  }
  const uint64_t window = windows_ <= uint64_t{1} << 32 ? order32_[index % windows_] : order_[index % windows_];
  dataset_->read_tokens(token_begin_ + window * static_cast<uint64_t>(seq_length_),
                        static_cast<uint64_t>(seq_length_) + 1, out);
}

// ---------------------------------------------------------------------------------------------

DataLoader::DataLoader(const DataLoaderOptions& options) : seq_length_(options.seq_length) {
  if (options.seq_length <= 0) {
    throw Error(strprintf("data: seq_length must be positive (got %lld)",
                          static_cast<long long>(options.seq_length)));
  }
  if (options.vocab_size <= 0 || options.vocab_size > INT32_MAX) {
    throw Error(strprintf("data: vocab_size must be in [1, 2^31) (got %lld)",
                          static_cast<long long>(options.vocab_size)));
  }
  if (options.mock) {
    sources_.push_back(
        std::make_unique<MockSampleSource>(options.vocab_size, options.seq_length, options.seed));
    weights_ = {1.0};
  } else {
    const auto blend = parse_data_path(options.data_path, options.data_path_key);
    std::vector<std::shared_ptr<const IndexedDataset>> open(blend.size());
    for (size_t i = 0; i < blend.size(); ++i) open[i] = open_datasets().find(blend[i].prefix, options.vocab_size);
    for (size_t i = 0; i < blend.size(); ++i) {
      if (!open[i]) check_dataset_exists(blend[i].prefix);
    }
    for (size_t i = 0; i < blend.size(); ++i) {
      // A blend that names one prefix twice opens (and scans) it once: the copy this loader opened for it already,
      // not one looked up again (another loader's copy in the process may be gone by then, and a second open would
      // scan again, a collective step the other ranks do not take).
      for (size_t j = 0; j < i && !open[i]; ++j) {
        if (blend[j].prefix == blend[i].prefix) open[i] = open[j];
      }
      if (!open[i]) open[i] = open_datasets().find(blend[i].prefix, options.vocab_size);
      if (!open[i]) open[i] = open_datasets().open(blend[i].prefix, options.vocab_size, options.scan_share);
      const DocumentRange range = split_range(options, *open[i]);
      auto source = std::make_unique<IndexedSampleSource>(open[i], options.seq_length, options.seed, i, range);
      // Unweighted blends follow each dataset's size.
      const uint64_t size = options.blend_by_windows ? source->num_windows() : source->num_tokens();
      weights_.push_back(blend[i].weight >= 0.0 ? blend[i].weight : static_cast<double>(size));
      sources_.push_back(std::move(source));
    }
  }
  const double total = std::accumulate(weights_.begin(), weights_.end(), 0.0);
  for (double& w : weights_) w /= total;
  position_.per_source.assign(sources_.size(), 0);
}

DataLoader::~DataLoader() = default;
DataLoader::DataLoader(DataLoader&&) noexcept = default;
DataLoader& DataLoader::operator=(DataLoader&&) noexcept = default;

std::string DataLoader::describe() const {
  std::string out;
  for (size_t i = 0; i < sources_.size(); ++i) {
    if (!out.empty()) out += "\n";
    out += strprintf("weight %.4f  %s", weights_[i], sources_[i]->describe().c_str());
  }
  return out;
}

size_t DataLoader::choose_source() const {
  const double k1 = static_cast<double>(position_.consumed_samples + 1);
  size_t best = 0;
  double best_error = -INFINITY;
  for (size_t i = 0; i < sources_.size(); ++i) {
    const double error = weights_[i] * k1 - static_cast<double>(position_.per_source[i]);
    if (error > best_error) {  // strict: ties go to the lowest index
      best_error = error;
      best = i;
    }
  }
  return best;
}

void DataLoader::next(int32_t* out) {
  const size_t s = choose_source();
  sources_[s]->sample(position_.per_source[s], out);
  ++position_.per_source[s];
  ++position_.consumed_samples;
}

void DataLoader::skip() {
  const size_t s = choose_source();
  ++position_.per_source[s];
  ++position_.consumed_samples;
}

void DataLoader::seek(const DataPosition& position) {
  if (position.per_source.size() != sources_.size()) {
    throw Error(
        strprintf("data position has %zu sources but the data config has %zu; the checkpoint "
                  "was saved with a different dataset.data_path / dataset.mock",
                  position.per_source.size(), sources_.size()));
  }
  uint64_t sum = 0;
  for (const uint64_t c : position.per_source) {
    if (c > UINT64_MAX - sum) {
      throw Error("data position is inconsistent: its per-source counts overflow 64 bits (a damaged or edited file)");
    }
    sum += c;
  }
  if (sum != position.consumed_samples) {
    throw Error(
        strprintf("data position is inconsistent: per-source counts sum to %llu but "
                  "consumed_samples is %llu",
                  static_cast<unsigned long long>(sum),
                  static_cast<unsigned long long>(position.consumed_samples)));
  }
  position_ = position;
}

}  // namespace sg::data
