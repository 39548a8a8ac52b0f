#pragma once
// The trainer's side of checkpoints: TrainingState + parameter layout <-> the checkpoint folder of
// train/checkpoint (model weights under Hugging Face names, fp32 main weights and Adam moments under
// the same names, train_state.json with step, data position and RNG state).
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "config/config.h"
#include "data/blended_dataset.h"
#include "data/hf_tokenizer.h"
#include "model/stack.h"
#include "train/backend.h"

namespace sg::train {

// The run's tokenizer: its files are copied in and its end-of-document id is config.json's eos_token_id, so the
// folder loads with transformers' AutoTokenizer as well as AutoModelForCausalLM, and their generate stops at EOD.
struct CheckpointTokenizer {
  std::vector<std::string> files;       // data::HfTokenizerInfo::files (tokenizer.json, ...); empty: no tokenizer
  std::optional<int64_t> eos_token_id;  // the end-of-document id; nullopt: none (mock data, no tokenizer)
};

// What config.json keeps of the folder a run started from (checkpoint.pretrained_checkpoint): what its weights
// still are that the training configuration does not say.
struct CheckpointSource {
  int64_t max_position_embeddings = 0;  // the context its weights serve (its RoPE, llama3 scaling included)
  nlohmann::json bos_token_id;          // as its config.json has them: null, an id or a list of ids; kept when
  nlohmann::json eos_token_id;          // the run has no tokenizer of its own (its vocabulary is the source's)
};

// What a saved folder's Hugging Face files take from outside the training state.
struct CheckpointExport {
  CheckpointTokenizer tokenizer;
  std::optional<CheckpointSource> source;  // nullopt: trained from scratch
};

// The export of a run: `tokenizer`'s files and EOD, and checkpoint.pretrained_checkpoint's config.json (read
// now, so a malformed one fails before the first step). sg::Error naming the file, the key and its value when a
// bos_token_id or eos_token_id there is not null, an id or a list of ids.
CheckpointExport checkpoint_export(const config::Config& config, const std::optional<data::HfTokenizerInfo>& tokenizer);

// Saves under config.checkpoint.save-style root `dir` as iter_<steps_done>; returns the folder.
// `run_id` (train/run_folder.h) goes into train_state.json, so a resumed run keeps its run folder's records.
// config.json's max_position_embeddings is model.seq_length, or the source's when that is larger; its
// bos_token_id/eos_token_id are the tokenizer's (no BOS, the EOD), else the source's, else null.
std::string save_checkpoint(const std::string& dir, const config::Config& config, const model::ModelLayout& layout,
                            const TrainingState& state, const data::DataPosition& position, const std::string& run_id,
                            const CheckpointExport& exported = {});

struct LoadedCheckpoint {
  std::string path;  // the iteration folder that was loaded
  TrainingState state;
  data::DataPosition position;
  std::string run_id;  // the run that saved it; "" for a checkpoint from before run ids
};

// Loads DIR (its latest iteration) or an iteration folder. Refuses, listing every tensor name and
// shape that differs, a checkpoint that does not match `layout`; warns when the config differs.
LoadedCheckpoint load_checkpoint(const std::string& path, const config::Config& config, const model::ModelLayout& layout);

}  // namespace sg::train
