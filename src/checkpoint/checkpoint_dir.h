#pragma once
// Checkpoint directories, Megatron style:
//   DIR/iter_0000100/model.safetensors                   model weights, Hugging Face Llama names
//   DIR/iter_0000100/config.json                         LlamaConfig: transformers loads the folder
//   DIR/iter_0000100/optimizer_main_params.safetensors   fp32 main weights   (same names)
//   DIR/iter_0000100/optimizer_exp_avg.safetensors       Adam first moment   (same names)
//   DIR/iter_0000100/optimizer_exp_avg_sq.safetensors    Adam second moment  (same names)
//   DIR/iter_0000100/train_state.json                    step, data position, RNG, config hash,
//                                                        CRC-32 and size of every other file
//   DIR/iter_0000100/tokenizer.json, ...                 copied files (the tokenizer's), when given; one may
//                                                        lie in a subfolder (additional_chat_templates/x.jinja)
//   DIR/latest_checkpointed_iteration.txt                "100\n": the newest whole save
//   DIR/.lock                                            held by the run saving here (save_dir_lock.h)
//   DIR/iter_0000050.removing                            an old iteration folder being removed by retention
//                                                        (checkpoint.most_recent_k, retention.h): no checkpoint
// Saving is atomic: files go into DIR/iter_0000100.tmp-<pid>, each fsynced, the folder fsynced,
// renamed to iter_0000100 (swapped atomically if it exists), DIR fsynced, and only then is `latest`
// replaced (temporary + fsync + rename). A crash at any point leaves `latest` naming a whole
// checkpoint. A save that fails (disk full, I/O error) removes its temporary folder before the error
// propagates.
//
// Loading verifies before it copies a byte: every file's CRC-32 against train_state.json, the
// iteration against the folder name, the tensors' names, shapes and dtypes, and that every float is
// finite.
#include <cstdint>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/safetensors.h"
#include "checkpoint/train_state.h"

namespace sg::checkpoint {

inline constexpr const char* kModelFile = "model.safetensors";
inline constexpr const char* kConfigFile = "config.json";
// A Hugging Face folder's generation defaults; read for its eos_token_id (checkpoint/hf_import.h).
inline constexpr const char* kGenerationConfigFile = "generation_config.json";
inline constexpr const char* kOptimizerMainParamsFile = "optimizer_main_params.safetensors";
inline constexpr const char* kOptimizerExpAvgFile = "optimizer_exp_avg.safetensors";
inline constexpr const char* kOptimizerExpAvgSqFile = "optimizer_exp_avg_sq.safetensors";
inline constexpr const char* kTrainStateFile = "train_state.json";
inline constexpr const char* kLatestFile = "latest_checkpointed_iteration.txt";

// Generic contents of one checkpoint folder.
struct TensorFile {
  std::string filename;
  std::vector<TensorRef> tensors;
  std::map<std::string, std::string> metadata;
};
struct JsonFile {
  std::string filename;
  nlohmann::json content;
};
// A file copied byte for byte into the folder (e.g. the tokenizer's files, so that
// transformers.AutoTokenizer.from_pretrained(checkpoint) works next to AutoModelForCausalLM).
struct CopiedFile {
  std::string source;    // path to read
  std::string filename;  // path inside the checkpoint folder: a name, or subfolder/name (created, and fsynced)
};
struct TextFile {
  std::string filename;  // a name in the checkpoint folder
  std::string text;      // written as given
};
struct CheckpointContents {
  std::vector<TensorFile> tensor_files;
  std::vector<JsonFile> json_files;
  std::vector<CopiedFile> copied_files;
  std::vector<TextFile> text_files;
  // The JSON file (one of json_files, written last) that records the size and CRC-32 of every
  // file written before it under "file_checksums"; empty for none.
  std::string checksums_into;
};

inline constexpr const char* kFileChecksumsKey = "file_checksums";

// Test hooks: on_write runs after each written chunk of each file, on_stage after "files_written"
// (folder complete, not yet renamed), "renamed" (iter folder in place, latest not yet updated) and
// "latest_written". A hook may kill the process to simulate a crash.
struct SaveHooks {
  WriteProgressHook on_write;
  std::function<void(const std::string& stage)> on_stage;
};

std::string iteration_dir_name(int64_t iteration);  // "iter_0000100"

// Saves `contents` as DIR/iter_NNNNNNN atomically and points `latest` at it; returns the folder
// path. Leftover DIR/iter_*.tmp-* folders of crashed saves are removed first.
std::string save_checkpoint(const std::string& dir, int64_t iteration,
                            const CheckpointContents& contents, const SaveHooks& hooks = {});

// The iteration `latest` names, or nullopt when DIR has no latest file. sg::Error when it is
// malformed or not a regular file.
std::optional<int64_t> read_latest_iteration(const std::string& dir);

// The iterations of DIR's iter_NNNNNNN folders (temporaries excluded), ascending; empty when DIR
// does not exist.
std::vector<int64_t> list_iterations(const std::string& dir);
// Whether DIR holds anything of a checkpoint: a latest file or an iteration folder.
bool holds_checkpoints(const std::string& dir);
// Removes DIR's iteration folders, its latest file and leftovers of interrupted saves and removals (retention.h)
// (the folder itself, its lock and any other file stay). Returns the iterations removed.
std::vector<int64_t> remove_checkpoints(const std::string& dir);

// A folder to load from: DIR/iter_N named by DIR's latest file, or DIR itself when it is an
// iteration folder (holds train_state.json or model.safetensors), or, when DIR has no latest file but
// iteration folders, its newest one that holds a train_state.json (a save killed between renaming its
// folder into place and writing `latest`; a folder is renamed only once whole, and loading verifies it).
// sg::Error naming DIR otherwise (a latest file naming a missing folder lists the iterations there),
// starting with `what`: the key or argument that named DIR ("checkpoint.pretrained_checkpoint",
// "generate CHECKPOINT").
std::string resolve_checkpoint(const std::string& path, const std::string& what = "checkpoint.load");

struct CheckpointFolder {
  std::string path;                    // the iteration folder resolve_checkpoint names
  bool newest_without_latest = false;  // DIR had no latest file: `path` is its newest iteration folder
};
// resolve_checkpoint, saying whether it fell back to the newest iteration folder (for the log).
CheckpointFolder find_checkpoint_folder(const std::string& path, const std::string& what = "checkpoint.load");

// For a folder that is no checkpoint: "; it holds iter_0000001, iter_0000002 but no latest_checkpointed_iteration.txt
// ...: name an iteration folder, e.g. DIR/iter_0000002, or write 2 into DIR/latest..." when DIR has iteration
// folders (a save interrupted before its latest file, or a partial copy); "" when it has none.
std::string iteration_folders_hint(const std::string& dir);

// Whether FOLDER is an iteration folder stepgraph saved (it holds train_state.json).
bool is_checkpoint_folder(const std::string& folder);

struct FolderVerification {
  // The key or argument that named the folder ("checkpoint.load", "checkpoint.pretrained_checkpoint",
  // "generate CHECKPOINT"): the advice for a damaged folder names it.
  std::string what{};
  // The tensor files the caller reads (file names in the folder): each must be recorded and whole.
  std::vector<std::string> tensor_files{};
  // Also verify the recorded tensor files the caller does not read (a resume reads them all). When false
  // they are skipped (generate need not read 12 bytes a parameter of optimizer state to use the model).
  bool all_tensor_files = true;
  // Warn when the folder predates checksums (once per load, not at every verification of it).
  bool warn_without_checksums = true;
};

// Verifies the stepgraph checkpoint folder DIR before anything in it is used: train_state.json (its own
// checksum), its iteration against the folder name, and the size and CRC-32 of every file train_state.json
// records under file_checksums (the other files: config.json, the tokenizer's; the tensor files as
// `options` says). A missing or changed file is an sg::Error naming it, with what to do. A checkpoint
// saved before checksums has none: it is used unverified (with a warning). Returns the train state.
// The one check behind checkpoint.load, checkpoint.pretrained_checkpoint and `stepgraph generate`.
TrainState verify_checkpoint_folder(const std::string& dir, const FolderVerification& options);

// What to do about the damaged checkpoint folder DIR: the iteration before it, loaded through `what`
// (the key or argument that named DIR), or a backup.
std::string damaged_checkpoint_advice(const std::string& dir, const std::string& what);

// ---- The training checkpoint: the standard files above, from generic tensor lists ----

struct TrainingCheckpoint {
  std::vector<TensorRef> model;  // Hugging Face names (model.layers.0.self_attn.q_proj.weight ...)
  nlohmann::json model_config;   // hf_model_config(spec, dtype); null: no config.json
  std::vector<TensorRef> main_params;  // fp32, same names
  std::vector<TensorRef> exp_avg;
  std::vector<TensorRef> exp_avg_sq;
  TrainState state;
  std::vector<CopiedFile> extra_files;  // copied in (the tokenizer's files), each with its checksum
  std::vector<TextFile> extra_texts;    // written as given (the source's generation_config.json), with checksums
};
CheckpointContents training_checkpoint_contents(const TrainingCheckpoint& checkpoint);

// Where a loaded checkpoint goes. An empty optimizer list skips that file (e.g. weights-only load).
struct TrainingCheckpointDest {
  std::vector<TensorDest> model;
  std::vector<TensorDest> main_params;
  std::vector<TensorDest> exp_avg;
  std::vector<TensorDest> exp_avg_sq;
};

// Loads the folder resolve_checkpoint(path) names. Every file is validated before any byte is
// copied, so a refused checkpoint leaves the buffers untouched: its CRC-32 and size against
// train_state.json (a checkpoint without checksums, from an older stepgraph, loads with a warning),
// train_state.json's iteration against the folder name, the tensors against `dest` (the sg::Error
// lists every tensor whose name, shape or dtype differs, per file), and every F32/BF16 value is
// finite. Returns the train state.
TrainState load_training_checkpoint(const std::string& path, const TrainingCheckpointDest& dest);

// A verified training checkpoint whose tensor files stay memory-mapped (nullopt: a part not asked for).
struct OpenedTrainingCheckpoint {
  TrainState state;
  std::optional<SafetensorsFile> model, main_params, exp_avg, exp_avg_sq;
};
// load_training_checkpoint's verification, with the same errors, without its copy: the caller reads the mapped
// tensors (file-backed pages, shared by the processes that map them, instead of a private copy). `expected`'s data
// pointers are not used.
OpenedTrainingCheckpoint open_training_checkpoint(const std::string& path, const TrainingCheckpointDest& expected);

}  // namespace sg::checkpoint
