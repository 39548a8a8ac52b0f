#pragma once
// The training sample stream: dataset.data_path (one or more Megatron indexed datasets, optionally
// weighted) or dataset.mock, cut into windows of seq_length+1 tokens, in a seeded shuffled order,
// with a position that a checkpoint saves so that a resumed run reads exactly the same samples.
//
// Sampling (documented in docs/data-and-checkpoints.md):
// - Each indexed dataset is one token stream (its sequences concatenated in file order, across
//   document boundaries). Window i covers tokens [i*L, i*L + L + 1) with L = seq_length, so there
//   are (tokens - 1) / L windows per epoch; consecutive windows share one token, as in Megatron.
// - Epoch e of source s visits its windows in seeded_permutation(windows, mix(seed, s, e)).
// - Blending picks, for global sample k, the source whose share lags its weight most
//   (argmax_i weight_i * (k+1) - taken_i, ties to the lowest index): Megatron's greedy blend, which
//   is exact and needs no precomputed table.
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/dataset_split.h"
#include "data/indexed_dataset.h"
#include "data/token_scan_share.h"

namespace sg::data {

struct WeightedPrefix {
  std::string prefix;
  double weight = 1.0;  // unnormalised; < 0 means "unweighted" before resolution
};

// Parses dataset.data_path the Megatron way: ["a"], ["a", "b"] (weights proportional to each
// dataset's size, as Megatron concatenates unweighted blends) or ["0.3", "a", "0.7", "b"].
// Errors (sg::Error) name the entry: odd-length weighted lists, negative or non-numeric weights,
// all-zero weights, an empty list. `key`: the config key the list came from, as the messages name it.
std::vector<WeightedPrefix> parse_data_path(const std::vector<std::string>& data_path,
                                            const std::string& key = "dataset.data_path");

// sg::Error when PREFIX.idx or PREFIX.bin is missing, saying how to make a dataset (stepgraph data synth,
// tools/train_tokenizer.py + tools/preprocess_data.py), and what the name suggests: one of the pair's
// files given instead of the prefix (DATA.bin: drop the suffix), preprocess_data.py's PREFIX_text_document
// beside PREFIX, a *.tmp left by a write that did not finish. train, validate and `data inspect` share it.
void check_dataset_exists(const std::string& prefix);

// Where the stream stands: how many samples it has produced in total and from each source.
struct DataPosition {
  uint64_t consumed_samples = 0;
  std::vector<uint64_t> per_source;  // samples taken from each source; sums to consumed_samples

  nlohmann::json to_json() const;
  static DataPosition from_json(const nlohmann::json& j);  // sg::Error on a malformed value
  bool operator==(const DataPosition&) const = default;
};

// One source of windows (an indexed dataset or the mock generator).
class SampleSource {
 public:
  virtual ~SampleSource() = default;
  virtual std::string describe() const = 0;
  virtual uint64_t num_tokens() const = 0;  // for unweighted blends; 0 for mock
  // Writes the tokens of this source's `index`-th sample (seq_length + 1 of them) into `out`.
  virtual void sample(uint64_t index, int32_t* out) = 0;
};

// Part of an indexed dataset: documents [first, last), its whole token stream by default.
struct DocumentRange {
  uint64_t first = 0;
  uint64_t last = UINT64_MAX;  // clamped to the dataset's document count
  std::string label;           // "train split, documents [0, 97)": for describe()
};

// A dataset (or its split's document range) holds fewer tokens than one sample: the evaluation of a test split
// that small is skipped (train/evaluation.h); everywhere else it is the error it says.
class TooFewTokensError : public sg::Error {
 public:
  using sg::Error::Error;
};

// Windows of (a document range of) an indexed dataset, reshuffled every epoch; TooFewTokensError when the range
// holds no sample.
class IndexedSampleSource : public SampleSource {
 public:
  IndexedSampleSource(IndexedDataset dataset, int64_t seq_length, uint64_t seed,
                      uint64_t source_id, const DocumentRange& documents = {});
  // A dataset other loaders may read too (DataLoader shares one open corpus between them).
  IndexedSampleSource(std::shared_ptr<const IndexedDataset> dataset, int64_t seq_length, uint64_t seed,
                      uint64_t source_id, const DocumentRange& documents = {});
  std::string describe() const override;
  uint64_t num_tokens() const override { return token_end_ - token_begin_; }
  uint64_t num_windows() const { return windows_; }  // the samples of one epoch
  void sample(uint64_t index, int32_t* out) override;
  const IndexedDataset& dataset() const { return *dataset_; }

 private:
  std::shared_ptr<const IndexedDataset> dataset_;
  int64_t seq_length_;
  uint64_t seed_;
  uint64_t source_id_;
  uint64_t token_begin_ = 0, token_end_ = 0;  // the range's part of the token stream
  std::string range_label_;
  uint64_t windows_;
  uint64_t cached_epoch_ = UINT64_MAX;
  // The permutation of the cached epoch: 4 bytes a window while they fit (a 10^12-token corpus has 2.4e8 windows
  // at seq_length 4096), else 8.
  std::vector<uint32_t> order32_;
  std::vector<uint64_t> order_;
};

struct DataLoaderOptions {
  std::vector<std::string> data_path;  // dataset.data_path
  std::string data_path_key = "dataset.data_path";  // the key data_path came from, as errors name it
  bool mock = false;                   // dataset.mock: seeded random tokens, data_path ignored
  int64_t seq_length = 0;
  int64_t vocab_size = 0;  // every token id is checked against it at open
  uint64_t seed = 1234;    // dataset / rng seed
  // dataset.split: read only `split`'s documents of every dataset (dataset_split.h). Unset: all.
  std::optional<SplitShares> split_shares;
  Split split = Split::train;
  // An unweighted blend weighs its datasets by their windows instead of their tokens, so its first
  // samples_per_epoch(options) samples are every window of every dataset once (validation.full_validation).
  bool blend_by_windows = false;
  // Data parallel: the ranks share the scan of each corpus they open (data/token_scan_share.h), so the run reads it
  // once. Collective: every rank's loaders open the same corpora in the same order. Default: scanned whole, alone.
  ScanShare scan_share;
};

// Samples one epoch of the training data holds: the windows of every dataset of an unweighted options.data_path
// (its options.split share with split_shares), read from the index files alone (IndexedDataset::open_index). Bridge's
// train.num_epochs counts these. sg::Error for mock data (endless), a weighted blend (whose epoch is not defined) or
// a missing dataset; TooFewTokensError when a dataset's share holds no sample.
uint64_t samples_per_epoch(const DataLoaderOptions& options);

class DataLoader {
 public:
  // Opens every dataset of options.data_path (IndexedDataset::open: both files mapped, every token scanned, by the
  // ranks together with options.scan_share), or takes it from a loader of this process that holds it open with the
  // same vocab_size: training's loader and dataset.split's validation loader read one corpus, whose scan reads all of
  // it (2 TB for 10^12 uint16 tokens); a blend naming one prefix twice opens it once.
  // Such a loader reads the corpus as it was when first opened, even if its files were written again since.
  explicit DataLoader(const DataLoaderOptions& options);
  ~DataLoader();
  DataLoader(DataLoader&&) noexcept;
  DataLoader& operator=(DataLoader&&) noexcept;

  int64_t seq_length() const { return seq_length_; }
  size_t num_sources() const { return sources_.size(); }
  const std::vector<double>& weights() const { return weights_; }  // normalised, sum 1
  // One line per source (prefix, weight, tokens, windows) for the trainer's startup log.
  std::string describe() const;

  // Writes the next sample (seq_length + 1 tokens) into `out` and advances the position.
  void next(int32_t* out);
  // Advances the position past the next sample without reading it (data-parallel ranks skip the other
  // ranks' rows of a global batch: data/rank_batch.h).
  void skip();
  const DataPosition& position() const { return position_; }
  // Continues from a saved position. sg::Error when it does not fit this loader (source count,
  // per-source counts inconsistent with the blend).
  void seek(const DataPosition& position);

 private:
  size_t choose_source() const;

  int64_t seq_length_;
  std::vector<std::unique_ptr<SampleSource>> sources_;
  std::vector<double> weights_;
  DataPosition position_;
};

}  // namespace sg::data
