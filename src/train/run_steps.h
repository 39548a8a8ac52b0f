#pragma once
// The steps of a run, once train() (trainer.h) has checked and prepared everything: progress, metrics,
// evaluation, checkpoints, and the stop on a signal or a failed metrics write (finish the step, save, report).
#include <chrono>
#include <optional>
#include <string>

#include "config/config.h"
#include "data/hf_tokenizer.h"
#include "model/batch.h"
#include "model/spec.h"
#include "train/backend.h"
#include "train/batch_source.h"
#include "train/checkpointing.h"
#include "train/evaluation.h"
#include "train/pretrained.h"
#include "train/save_dir_policy.h"
#include "train/trainer.h"

namespace sg::train {

// What a run knows before its steps: the tokenizer, what its saves export, the evaluation, its start, its run id
// and rank 0's checkpoint folders.
struct RunContext {
  std::optional<data::HfTokenizerInfo> tokenizer;
  CheckpointExport checkpoint_export;  // what saved folders take from the tokenizer and a pretrained source
  // The validation: one evaluation, or one a set (validation.multiple_validation_sets), all on one schedule.
  std::vector<Evaluation*> evaluations;
  Evaluation* test_evaluation = nullptr;  // dataset.split's test share, after the last step's validation
  std::chrono::steady_clock::time_point start;
  std::string run_id;              // train/run_folder.h: the checkpoint's when resuming, else a new one (rank 0's)
  CheckpointDirs* dirs = nullptr;  // rank 0's checkpoint.save policy (train/save_dir_policy.h)
};

// The steps of a run, with progress, metrics, evaluation, checkpoints and stops; fills `summary`. Loads `loaded`
// (a resume) or else `pretrained` into the backend first, and unmaps their files once it holds the state.
void run_steps(const config::Config& config, const TrainOptions& options, const model::ModelSpec& model,
               const model::BatchSpec& batch, TrainingBackend& backend, BatchSource& data,
               std::optional<LoadedCheckpoint>& loaded, std::optional<PretrainedStart>& pretrained,
               const RunContext& run, TrainSummary& summary);

}  // namespace sg::train
