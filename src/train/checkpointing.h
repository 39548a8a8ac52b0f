#pragma once
// The trainer's side of checkpoints: TrainingState + parameter layout <-> the checkpoint folder of
// train/checkpoint (model weights under Hugging Face names, fp32 main weights and Adam moments under
// the same names, train_state.json with step, data position and RNG state).
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "config/config.h"
#include "data/blended_dataset.h"
#include "model/stack.h"
#include "train/backend.h"

namespace sg::train {

// Saves under config.checkpoint.save-style root `dir` as iter_<steps_done>; returns the folder.
// `run_id` (train/run_folder.h) goes into train_state.json, so a resumed run keeps its run folder's records.
// `tokenizer`'s files are copied in and its end-of-document id is config.json's eos_token_id, so the folder
// loads with transformers' AutoTokenizer as well as AutoModelForCausalLM, and their generate stops at EOD.
struct CheckpointTokenizer {
  std::vector<std::string> files;       // tokenizer.json, tokenizer_config.json, special_tokens_map.json
  std::optional<int64_t> eos_token_id;  // the end-of-document id; nullopt: none (mock data, no tokenizer)
};
std::string save_checkpoint(const std::string& dir, const config::Config& config, const model::ModelLayout& layout,
                            const TrainingState& state, const data::DataPosition& position, const std::string& run_id,
                            const CheckpointTokenizer& tokenizer = {});

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
