// Rule 16, the user-data part: the tokenizer section and the vocabulary it implies, the datasets of
// dataset.data_path / dataset.valid_data_path (they must exist: train opens them first), dataset.split,
// evaluation (the validation section), dataset.eod_mask_loss and the logger section. Every
// failure names the keys, their values and a fix.
#include <algorithm>
#include <limits>
#include <utility>

#include "config/tokenizer_vocab.h"
#include "config/validate.h"
#include "config/validation_sets.h"
#include "core/error.h"
#include "core/paths.h"
#include "core/strings.h"
#include "data/blended_dataset.h"
#include "data/dataset_split.h"

namespace sg::config::detail {
namespace {

// Megatron-LM's --tokenizer-type choices: known names that stepgraph does not read yet.
const std::vector<std::string> kMegatronTokenizerTypes = {
    "BertWordPieceLowerCase", "BertWordPieceCase", "GPT2BPETokenizer",      "SentencePieceTokenizer",
    "GPTSentencePieceTokenizer", "HuggingFaceTokenizer", "Llama2Tokenizer", "TikTokenizer",
    "MultimodalTokenizer",    "NullTokenizer",     "NullMultimodalTokenizer", "SFTTokenizer"};

class Reporter {
 public:
  Reporter(const Config& config, std::vector<Violation>& violations, std::vector<Note>& notes)
      : c_(config), violations_(violations), notes_(notes) {}
  void fail(const std::string& message, const std::vector<std::string>& keys, const std::string& fix) {
    violations_.push_back({16, message, values(keys), fix});
  }
  void note(const std::string& message, const std::vector<std::string>& keys) {
    notes_.push_back({16, message, values(keys)});
  }

 private:
  std::vector<KeyValue> values(const std::vector<std::string>& keys) const {
    std::vector<KeyValue> out;
    for (const auto& key : keys) out.push_back({key, format_value(c_, key)});
    return out;
  }
  const Config& c_;
  std::vector<Violation>& violations_;
  std::vector<Note>& notes_;
};

// A lower layer's error about a file or folder the config names (a dataset, the tokenizer folder), led for a
// relative path by what it was resolved against: YAML and overrides alike are read from the working directory.
std::string path_error(const std::string& path, const std::string& error) {
  const std::string described = describe_path(path);
  return described == path ? error : described + ": " + error;
}

// The datasets of a data_path-like key (prefixes, or a blend "w1 prefix1 w2 prefix2" whose weights are no
// files): the blend as train parses it, and each PREFIX.bin/.idx present, with the data layer's own message.
void check_datasets(Reporter& r, const std::string& key, const std::vector<std::string>& data_path) {
  std::vector<data::WeightedPrefix> blend;
  try {
    blend = data::parse_data_path(data_path, key);
  } catch (const Error& e) {
    r.fail(e.what(), {key},
           "write " + key + " as prefixes [PREFIX, ...] or a weighted blend [w1, PREFIX1, w2, PREFIX2, ...]");
    return;
  }
  for (const data::WeightedPrefix& p : blend) {
    try {
      data::check_dataset_exists(p.prefix);
    } catch (const Error& e) {
      r.fail(path_error(p.prefix, e.what()), {key},
             "make the dataset (above), or point " + key + " at an existing PREFIX, which names PREFIX.bin and "
             "PREFIX.idx (a relative one is read from the working directory)");
    }
  }
}

// validation.eval_global_batch_size and eval_micro_batch_size (null: the training's): Bridge's rule that the ranks
// share an evaluation batch in whole microbatches. The evaluation runs in the training step's shape
// (train/evaluation.h), so the evaluation microbatch changes nothing but this rule: a note says so.
void check_eval_batch(const Config& c, Reporter& r) {
  const ValidationConfig& v = c.validation;
  bool valid = true;
  for (const auto& [key, value] : {std::pair{"validation.eval_global_batch_size", v.eval_global_batch_size},
                                   std::pair{"validation.eval_micro_batch_size", v.eval_micro_batch_size}}) {
    if (value && *value < 1) {
      r.fail(std::string(key) + " must be >= 1 (or null: the training's)", {key},
             std::string("set ") + key + " to a positive number of sequences, or null");
      valid = false;
    }
  }
  if (!valid || (!v.eval_global_batch_size && !v.eval_micro_batch_size)) return;  // the training's: its own rules
  const int64_t micro = v.eval_micro_batch_size.value_or(c.train.micro_batch_size.value_or(0));
  const int64_t global = v.eval_global_batch_size.value_or(c.train.global_batch_size.value_or(0));
  const int64_t ranks = std::max<int64_t>(1, c.data_parallel_size);
  if (micro < 1 || global < 1) return;  // the training's batch is invalid: reported under its keys
  if (global % (micro * ranks) != 0) {
    r.fail(strprintf("the evaluation batch of %lld sequences does not divide into microbatches of %lld sequences on "
                     "each of %lld data-parallel rank%s (Bridge's rule)",
                     static_cast<long long>(global), static_cast<long long>(micro), static_cast<long long>(ranks),
                     ranks == 1 ? "" : "s"),
           {"validation.eval_global_batch_size", "validation.eval_micro_batch_size", "train.global_batch_size",
            "train.micro_batch_size"},
           strprintf("set validation.eval_global_batch_size to a multiple of %lld, e.g. %lld",
                     static_cast<long long>(micro * ranks),
                     static_cast<long long>(std::max<int64_t>(1, global / (micro * ranks)) * micro * ranks)));
    return;
  }
  if (v.eval_micro_batch_size && *v.eval_micro_batch_size != c.train.micro_batch_size.value_or(0)) {
    r.note(strprintf("the evaluation runs in the training step's microbatches of %lld sequences (its compiled "
                     "shapes); validation.eval_micro_batch_size = %lld sets only how the evaluation batch must divide. "
                     "The validation loss, a mean over the evaluation's tokens, does not depend on it",
                     static_cast<long long>(c.train.micro_batch_size.value_or(0)),
                     static_cast<long long>(*v.eval_micro_batch_size)),
           {"validation.eval_micro_batch_size", "train.micro_batch_size"});
  }
}

// Megatron-LM's validation.full_validation: every evaluation reads each sample of the validation set once (Bridge's
// training loop does not read the key). That needs a set with an end: no mock stream, no weighted blend of several
// datasets (its samples follow the weights). A note gives the set's size and says eval_iters is not used.
void check_full_validation(const Config& c, Reporter& r) {
  const ValidationConfig& v = c.validation;
  const DatasetConfig& d = c.dataset;
  if (!v.full_validation) return;
  if (d.mock) {
    r.fail("validation.full_validation reads the whole validation set, and dataset.mock is an endless stream",
           {"validation.full_validation", "dataset.mock"},
           "validate on your data (dataset.mock=false with dataset.data_path and dataset.split, or "
           "dataset.valid_data_path), or drop validation.full_validation");
    return;
  }
  const bool own_set = !d.valid_data_path.empty();
  const std::string& key = validation_data_key(c);
  data::DataLoaderOptions options;
  options.data_path = validation_data_paths(c);
  options.data_path_key = key;
  options.seq_length = d.seq_length.value_or(c.model.seq_length);
  uint64_t samples = 0;
  try {
    // What does not parse or is missing is the data checks' to report, once.
    const std::vector<data::WeightedPrefix> blend = data::parse_data_path(options.data_path, key);
    for (const data::WeightedPrefix& p : blend) data::check_dataset_exists(p.prefix);
    if (blend.size() > 1 && blend[0].weight >= 0.0) {
      r.fail("validation.full_validation reads each sample of the validation set once, and " + key +
                 " is a weighted blend, whose samples follow the weights",
             {"validation.full_validation", key},
             "give the validation datasets without weights (each then read whole), or drop validation.full_validation");
      return;
    }
    if (!own_set && d.split) {
      options.split_shares = data::parse_split(*d.split);
      options.split = data::Split::valid;
    }
    if (options.seq_length < 1) return;
    samples = data::samples_per_epoch(options);
  } catch (const Error&) {
    return;  // a split without validation documents, or too few tokens: the data checks and train report it
  }
  const int64_t global = v.eval_global_batch_size.value_or(c.train.global_batch_size.value_or(0));
  if (global < 1) return;
  const auto batches = static_cast<long long>((samples + static_cast<uint64_t>(global) - 1) / global);
  // With multiple_validation_sets each dataset is read whole on its own, in its own batches.
  const std::string read = v.multiple_validation_sets
                               ? strprintf(
                                     "each validation dataset whole, %llu samples in all, in batches of %lld "
                                     "sequences",
                                     static_cast<unsigned long long>(samples), static_cast<long long>(global))
                               : strprintf(
                                     "the whole validation set, %llu samples in %lld global batch%s of %lld "
                                     "sequences",
                                     static_cast<unsigned long long>(samples), batches, batches == 1 ? "" : "es",
                                     static_cast<long long>(global));
  r.note("validation.full_validation: every evaluation reads " + read +
             "; validation.eval_iters (the test split's batches) is not used for it",
         {"validation.full_validation", "validation.eval_iters"});
}

}  // namespace

void resolve_tokenizer(Config& c, std::vector<Violation>& violations, std::vector<Note>& notes) {
  Reporter r(c, violations, notes);
  const auto& t = c.tokenizer;
  ModelConfig& m = c.model;
  if (m.make_vocab_size_divisible_by < 1) {
    r.fail("model.make_vocab_size_divisible_by must be >= 1", {"model.make_vocab_size_divisible_by"},
           "set it to 1 (no padding) or a power of two such as 128 (Megatron's default)");
    return;
  }
  if (!tokenizer_configured(t)) {
    if (t.use_tokenizer_vocab_size) {
      r.note("tokenizer.use_tokenizer_vocab_size has no effect without a tokenizer: model.vocab_size is used",
             {"tokenizer.use_tokenizer_vocab_size", "model.vocab_size"});
    }
    return;
  }
  if (!t.tokenizer_type || !t.tokenizer_model) {
    r.fail("the tokenizer needs both tokenizer.tokenizer_type and tokenizer.tokenizer_model",
           {"tokenizer.tokenizer_type", "tokenizer.tokenizer_model"},
           "set tokenizer.tokenizer_type=HuggingFaceTokenizer tokenizer.tokenizer_model=DIR (a folder with "
           "tokenizer.json, e.g. from tools/train_tokenizer.py)");
    return;
  }
  if (*t.tokenizer_type != kHuggingFaceTokenizer) {
    const bool known = std::find(kMegatronTokenizerTypes.begin(), kMegatronTokenizerTypes.end(),
                                 *t.tokenizer_type) != kMegatronTokenizerTypes.end();
    const std::string close = closest_match(*t.tokenizer_type, kMegatronTokenizerTypes);
    // GPT-2's vocab.json and merges.txt convert into a folder with the same ids (tools/convert_tokenizer.py).
    const bool gpt2 = *t.tokenizer_type == "GPT2BPETokenizer";
    r.fail(known ? "tokenizer type " + *t.tokenizer_type + " is not implemented yet"
                 : "unknown tokenizer.tokenizer_type '" + *t.tokenizer_type + "'" +
                       (close.empty() ? "" : "; did you mean '" + close + "'?"),
           {"tokenizer.tokenizer_type"},
           gpt2 ? "convert GPT-2's files into a tokenizer folder with the same ids: python3 tools/convert_tokenizer.py "
                  "--vocab-file VOCAB --merge-file MERGES --output DIR, then set "
                  "tokenizer.tokenizer_type=HuggingFaceTokenizer tokenizer.tokenizer_model=DIR"
                : "use HuggingFaceTokenizer with a Hugging Face tokenizer folder (tokenizer.json); "
                  "tools/train_tokenizer.py trains one on your text");
    return;
  }
  data::HfTokenizerInfo info;
  try {
    info = data::read_hf_tokenizer(*t.tokenizer_model);
  } catch (const Error& e) {
    r.fail(path_error(*t.tokenizer_model, e.what()), {"tokenizer.tokenizer_model"},
           "point tokenizer.tokenizer_model at a folder with tokenizer.json (tools/train_tokenizer.py writes one)");
    return;
  }
  const int64_t padded = padded_vocab_size(info.vocab_size, m.make_vocab_size_divisible_by);
  // Bridge's use_tokenizer_vocab_size: a set model.vocab_size gives way to the tokenizer's (setup.py).
  if (t.use_tokenizer_vocab_size && m.vocab_size && *m.vocab_size != padded) {
    r.note(strprintf("tokenizer.use_tokenizer_vocab_size: model.vocab_size %lld is replaced by the tokenizer's "
                     "vocabulary padded to a multiple of %lld: %lld",
                     static_cast<long long>(*m.vocab_size), static_cast<long long>(m.make_vocab_size_divisible_by),
                     static_cast<long long>(padded)),
           {"tokenizer.use_tokenizer_vocab_size", "model.vocab_size", "tokenizer.tokenizer_model"});
  }
  if (t.use_tokenizer_vocab_size) m.vocab_size.reset();
  if (!m.vocab_size) {
    m.vocab_size = padded;  // Bridge: taken from the tokenizer, padded as Megatron pads it
    c.derived_keys.push_back("model.vocab_size");
    return;
  }
  if (*m.vocab_size < info.vocab_size) {
    r.fail(strprintf("model.vocab_size %lld is smaller than the tokenizer's vocabulary (%lld tokens in %s): "
                     "some token ids would have no embedding",
                     static_cast<long long>(*m.vocab_size), static_cast<long long>(info.vocab_size),
                     t.tokenizer_model->c_str()),
           {"model.vocab_size", "tokenizer.tokenizer_model"},
           strprintf("set model.vocab_size=%lld (the vocabulary padded to a multiple of "
                     "model.make_vocab_size_divisible_by), or null to take it from the tokenizer",
                     static_cast<long long>(padded)));
  } else if (*m.vocab_size != padded) {
    r.note(strprintf("model.vocab_size %lld is not the tokenizer's vocabulary %lld padded to a multiple of %lld "
                     "(%lld); it is used as set, with %lld unused rows",
                     static_cast<long long>(*m.vocab_size), static_cast<long long>(info.vocab_size),
                     static_cast<long long>(m.make_vocab_size_divisible_by), static_cast<long long>(padded),
                     static_cast<long long>(*m.vocab_size - info.vocab_size)),
           {"model.vocab_size", "model.make_vocab_size_divisible_by"});
  }
}

// Megatron-LM's validation.test_mode: its realtime test that the data-parallel ranks hold the same weights
// (train/distributed_run.h require_same_weights, after every step).
void check_test_mode(const Config& c, Reporter& r) {
  if (!c.validation.test_mode) return;
  if (c.data_parallel_size <= 1) {
    r.note(
        "validation.test_mode compares the data-parallel ranks' weights after every step; with one rank there is "
        "nothing to compare it with, so it checks nothing here",
        {"validation.test_mode"});
  } else {
    r.note(strprintf(
               "validation.test_mode: after every step the %lld ranks compare fingerprints of their weights (a "
               "read of the bf16 weights, of the fp32 ones (with the distributed optimizer, those the forward reads), "
               "and a wait for every rank): ranks that differ stop the run naming the tensors",
               static_cast<long long>(c.data_parallel_size)),
           {"validation.test_mode"});
  }
}

void check_user_data(const Config& c, std::vector<Violation>& violations, std::vector<Note>& notes) {
  Reporter r(c, violations, notes);
  const DatasetConfig& d = c.dataset;
  const ValidationConfig& v = c.validation;
  // Under mock neither is read (a path set there is rule 16's error already); an empty data_path is one too.
  if (!d.mock) {
    if (!d.data_path.empty()) check_datasets(r, "dataset.data_path", d.data_path);
    if (!d.valid_data_path.empty()) check_datasets(r, "dataset.valid_data_path", d.valid_data_path);
  }
  std::optional<data::SplitShares> shares;
  if (d.split) {
    try {
      shares = data::parse_split(*d.split);
    } catch (const Error& e) {
      r.fail(e.what(), {"dataset.split"}, "write train,valid,test shares such as 969,30,1, or null");
    }
  }
  if (d.split && !d.valid_data_path.empty()) {
    r.fail("dataset.split and dataset.valid_data_path both say where the validation data is",
           {"dataset.split", "dataset.valid_data_path"},
           "use one: dataset.split cuts every dataset of data_path into train/valid/test documents, "
           "dataset.valid_data_path names separate validation datasets (then data_path trains whole)");
  }
  if (d.mock && !d.valid_data_path.empty()) {
    r.fail(
        "dataset.valid_data_path is set but dataset.mock is true, so it would not be read (mock validation "
        "samples instead)",
        {"dataset.mock", "dataset.valid_data_path"},
        "add dataset.mock=false (with dataset.data_path) to validate on it, or drop dataset.valid_data_path");
  }
  // A split that does not parse is an error under mock too: train parses it for the validation data whatever
  // dataset.mock says (train/evaluation.cpp), and it is wrong as written. A valid one has no effect: a note.
  if (d.mock && shares) {
    r.note("dataset.mock is true: validation uses mock samples too (another seed); the split's shares are not used",
           {"dataset.mock", "dataset.split"});
  }
  if (v.eval_interval && *v.eval_interval < 1) {
    r.fail("validation.eval_interval must be >= 1 (or null: no evaluation)", {"validation.eval_interval"},
           "set validation.eval_interval to the steps between evaluations, e.g. 100");
  }
  // At most 2^31 - 1, as the step counts.
  if (v.eval_iters < 1 || v.eval_iters > std::numeric_limits<int32_t>::max()) {
    r.fail("validation.eval_iters must be between 1 and 2147483647", {"validation.eval_iters"},
           "set validation.eval_iters to the global batches per evaluation (Megatron's default 100)");
  }
  check_eval_batch(c, r);
  check_full_validation(c, r);
  check_test_mode(c, r);
  check_validation_sets(c, violations);
  if (v.start_eval_at_iter && *v.start_eval_at_iter < 0) {
    r.fail("validation.start_eval_at_iter must be >= 0 (or null: from the first eval_interval)",
           {"validation.start_eval_at_iter"}, "set it to the first step that may evaluate, or null");
  }
  if (v.start_eval_at_iter && !v.eval_interval && !v.skip_train) {
    r.note("validation.start_eval_at_iter has no effect: validation.eval_interval is null (no evaluation)",
           {"validation.start_eval_at_iter", "validation.eval_interval"});
  }
  // Training reads the first share of data_path (train would refuse its empty split after loading the data).
  if (!v.skip_train && !d.mock && shares && !d.data_path.empty() && (*shares)[0] <= 0.0) {
    r.fail("dataset.split gives the training split no documents, so there is nothing to train on",
           {"dataset.split", "dataset.data_path"},
           "give the first (train) share a positive weight, e.g. dataset.split=969,30,1 (train,valid,test)");
  }
  const bool has_validation_data =
      d.mock || !d.valid_data_path.empty() || (shares && (*shares)[1] > 0.0);
  const char* const evaluating_key = v.skip_train ? "validation.skip_train" : "validation.eval_interval";
  if ((v.eval_interval || v.skip_train) && !has_validation_data) {
    r.fail(d.split ? "dataset.split gives the validation split no documents, so there is nothing to evaluate"
                   : std::string(evaluating_key) + " is set but there is no validation data",
           {evaluating_key, "dataset.split", "dataset.valid_data_path"},
           "split data_path with dataset.split=969,30,1 (train,valid,test shares), name validation datasets "
           "with dataset.valid_data_path=[PREFIX], or set " +
               std::string(evaluating_key) + (v.skip_train ? "=false" : "=null"));
  }
  if (!v.eval_interval && !v.skip_train && (d.split ? shares && (*shares)[1] > 0.0 : !d.valid_data_path.empty())) {
    r.note("there is validation data but validation.eval_interval is null: no evaluation runs",
           {"validation.eval_interval"});
  }
  if (v.skip_train) {
    if (c.checkpoint.overwrite) {
      r.fail(
          "validation.skip_train saves nothing, so checkpoint.overwrite (delete checkpoint.save's checkpoints "
          "and start over) has nothing to start over",
          {"validation.skip_train", "checkpoint.overwrite"},
          "drop checkpoint.overwrite to evaluate a checkpoint, or validation.skip_train to train");
    }
    const bool loads = c.checkpoint.load || c.checkpoint.pretrained_checkpoint;
    const bool may_load = c.checkpoint.auto_resume && c.checkpoint.save;
    r.note(loads ? "validation.skip_train: no training step and no save; one evaluation of the checkpoint's weights"
           : may_load ? "validation.skip_train: no training step and no save; one evaluation of checkpoint.save's "
                        "latest checkpoint (checkpoint.auto_resume), or of the initial weights when it holds none"
                      : "validation.skip_train without a checkpoint to load (checkpoint.load, "
                        "checkpoint.pretrained_checkpoint): one evaluation of the initial, untrained weights",
           {"validation.skip_train", "checkpoint.load", "checkpoint.pretrained_checkpoint"});
  }
  // Bridge's deprecated names, read as the validation keys (config_yaml.cpp).
  for (const Config::KeyName& name : c.key_names) {
    if (name.key.rfind("validation.", 0) != 0 || name.name == name.key) continue;
    r.note(strprintf("%s (at %s) is Megatron-Bridge's deprecated name of %s (TrainingConfig's evaluation keys moved "
                     "to ValidationConfig); read as that key, which config show and a run's config.yaml write",
                     name.name.c_str(), name.where.c_str(), name.key.c_str()),
           {name.key});
  }
  if (d.eod_mask_loss && !c.tokenizer.tokenizer_model) {
    r.fail("dataset.eod_mask_loss needs the end-of-document token id, which comes from the tokenizer",
           {"dataset.eod_mask_loss", "tokenizer.tokenizer_model"},
           "set tokenizer.tokenizer_type=HuggingFaceTokenizer tokenizer.tokenizer_model=DIR (its eos token is "
           "the EOD), or dataset.eod_mask_loss=false");
  }
  if (c.logger.tensorboard_dir && c.logger.tensorboard_dir->empty()) {
    r.fail("logger.tensorboard_dir is an empty path", {"logger.tensorboard_dir"}, "set a directory, or null");
  }
}

}  // namespace sg::config::detail
