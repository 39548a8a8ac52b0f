#pragma once
// The trainer's side of checkpoints: TrainingState + parameter layout <-> the checkpoint folder of
// train/checkpoint (model weights under Hugging Face names, fp32 main weights and Adam moments under
// the same names, train_state.json with step, data position and RNG state).
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/checkpoint_dir.h"
#include "config/config.h"
#include "data/blended_dataset.h"
#include "data/hf_tokenizer.h"
#include "model/stack.h"
#include "train/backend.h"

namespace sg::train {

// The run's tokenizer: its files are copied in and its BOS and end-of-document ids are config.json's bos_token_id
// and eos_token_id, so the folder loads with transformers' AutoTokenizer as well as AutoModelForCausalLM, and their
// generate starts an empty prompt with the BOS and stops at EOD.
struct CheckpointTokenizer {
  std::string dir;                      // the tokenizer folder
  std::vector<std::string> files;       // data::HfTokenizerInfo::files, relative to dir; empty: no tokenizer
  std::optional<int64_t> bos_token_id;  // its bos_token's id; nullopt: none
  std::optional<int64_t> eos_token_id;  // the end-of-document id; nullopt: none (mock data, no tokenizer)
};

// What config.json keeps of the folder the run's weights came from, that the training configuration does not say:
// the iteration folder it resumed (whose config.json a save wrote from its own source, so these carry over every
// resume), else checkpoint.pretrained_checkpoint's.
struct CheckpointSource {
  int64_t max_position_embeddings = 0;  // the context its weights serve (its RoPE, llama3 scaling included)
  nlohmann::json bos_token_id;          // as its config.json has them: null, an id or a list of ids; kept when
  nlohmann::json eos_token_id;          // the run has no tokenizer of its own (its vocabulary is the source's)
  // Its generation_config.json as written (empty: none), copied into every save: transformers' generate() and
  // stepgraph's stop at the eos ids listed there (Llama 3 Instruct lists its end-of-turn token only there).
  std::string generation_config;
  // A Mistral or Phi-3 source's sliding_window (nullopt: none, or another family): the saves are Mistral folders
  // with it (Phi-3's blocks are Llama's, its tensors fused only in the file).
  std::optional<int64_t> sliding_window;
};

// What a saved folder's Hugging Face files take from outside the training state.
struct CheckpointExport {
  CheckpointTokenizer tokenizer;
  std::optional<CheckpointSource> source;  // nullopt: trained from scratch
};

// The export of a run: `tokenizer`'s files, BOS and EOD, and checkpoint.pretrained_checkpoint's config.json and
// generation_config.json (read now, so a malformed one fails before the first step). sg::Error naming the file, the
// key and its value when a bos_token_id or eos_token_id there is not null, an id or a list of ids.
CheckpointExport checkpoint_export(const config::Config& config, const std::optional<data::HfTokenizerInfo>& tokenizer);

// The source of a run that resumed FOLDER (LoadedCheckpoint::path): its config.json (and generation_config.json,
// where a save copied one in), which replace checkpoint.pretrained_checkpoint's (checkpointing.cpp says why); nullopt when FOLDER has none (no transformers
// class loads its model, so none is written either). sg::Error naming the file, the key and its value when
// max_position_embeddings is not a positive integer, or bos_token_id or eos_token_id not null, an id or a list.
std::optional<CheckpointSource> resumed_checkpoint_source(const std::string& folder);

// Where the current global batch size started: every step after `iteration` consumed one global batch of
// the run's configuration. {0, 0} for a run that never changed it (train_state.json then has no key); a resume
// with another configuration starts a new one at its step, so a run that changed train.global_batch_size
// still checks its consumed_samples exactly.
struct SamplesBaseline {
  int64_t iteration = 0;
  uint64_t consumed_samples = 0;
  bool operator==(const SamplesBaseline&) const = default;
};

// What train_state.json's "extra" records for the trainer besides the training state.
struct ResumeRecord {
  std::string run_id;  // train/run_folder.h: a resumed run keeps its run folder's records
  SamplesBaseline samples_baseline;
  // The evaluation due after this step was skipped (a stop, a failed metrics write): a resumed run does it first.
  bool eval_pending = false;
};

// The hash train_state.json records: of the settings the training's numbers depend on (not the evaluation, the
// checkpoint and logger sections, the graph mode, the train_iters), so a resume can tell a changed configuration.
std::string canonical_config_hash(const config::Config& config);

// Saves under config.checkpoint.save-style root `dir` as iter_<steps_done>; returns the folder.
// `record` goes into train_state.json. config.json's max_position_embeddings is model.seq_length, or the
// source's when that is larger; its bos_token_id/eos_token_id are the tokenizer's (its BOS, its EOD: null
// where it has none), else the source's, else null.
std::string save_checkpoint(const std::string& dir, const config::Config& config, const model::ModelLayout& layout,
                            const TrainingState& state, const data::DataPosition& position, const ResumeRecord& record,
                            const CheckpointExport& exported = {});

struct LoadedCheckpoint {
  std::string path;  // the iteration folder that was loaded
  // The state to load: steps, RNG, and views of the checkpoint's mapped fp32 tensor files (mapped_files), which the
  // backend reads without a host copy. Their pages are the page cache's: shared by the ranks of a node that map the
  // same files, and evictable. release_state() unmaps them once the backend holds the state.
  TrainingStateView state;
  std::shared_ptr<const checkpoint::OpenedTrainingCheckpoint> mapped_files;
  // Empties state's views and unmaps the files (steps_done and rng stay).
  void release_state();
  data::DataPosition position;
  std::string run_id;  // the run that saved it; "" for a checkpoint from before run ids
  // What the resumed run's saves record: the file's baseline when the configuration is the same, else one at
  // this step.
  SamplesBaseline samples_baseline;
  bool eval_pending = false;  // ResumeRecord::eval_pending of the file
  bool same_config = true;    // saved with the same configuration hash (false: resume_data_position warns)
  std::string note;           // a line for the log ("" when nothing to say): how `path` was found
  std::string train_state_crc;  // the CRC-32 of its train_state.json as read (ranks compare what they resumed)
};

// The iteration folder load_checkpoint(path, ..., what) loads (a save directory's latest, or its newest iteration
// folder when it has no latest file), with LoadedCheckpoint::note. sg::Error as load_checkpoint's when there is none.
struct ResumeFolder {
  std::string path;
  std::string note;
};
ResumeFolder find_resume_folder(const std::string& path, const std::string& what = "checkpoint.load");

// Loads DIR (its latest iteration) or an iteration folder. Refuses, listing every tensor name and
// shape that differs, a checkpoint that does not match `layout`. `what` names the key that named `path`
// in messages (train/save_dir_policy.h resume_key).
LoadedCheckpoint load_checkpoint(const std::string& path, const config::Config& config,
                                 const model::ModelLayout& layout, const std::string& what = "checkpoint.load");

// Puts `loader` at the loaded checkpoint's data position (sg::Error naming its train_state.json and the fix when
// the data sources differ), then warns when the checkpoint was saved with another configuration. Before any
// device work: a refused resume says nothing about resuming anyway.
void resume_data_position(const LoadedCheckpoint& loaded, data::DataLoader& loader);

}  // namespace sg::train
