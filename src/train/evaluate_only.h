#pragma once
// validation.skip_train (Megatron's --skip-train, Bridge's ValidationConfig.skip_train): no training step. The
// weights of the checkpoint the run loads (checkpoint.load, or checkpoint.save with checkpoint.auto_resume, or
// checkpoint.pretrained_checkpoint; else the initial ones) are evaluated once on the validation data, as a training
// run's evaluations are, then on dataset.split's test share when it has documents (as Megatron evaluates its test
// set), and the result is printed and written to <run folder>/evaluations/iter_<step>.json. Nothing
// else is written: no checkpoint, and none of the run folder's training records (config.yaml, metrics.jsonl,
// report.html), so evaluating a checkpoint beside its training run changes none of that run's files.
#include <optional>
#include <string>

#include "config/config.h"
#include "train/backend.h"
#include "train/checkpointing.h"
#include "train/evaluation.h"
#include "train/pretrained.h"
#include "train/trainer.h"

namespace sg::train {

// The checkpoint settings a skip_train run reads its weights by: checkpoint.load, or checkpoint.save's latest with
// checkpoint.auto_resume. checkpoint.save is not written, so it is neither locked nor checked for another run's
// checkpoints; when it holds some and no key loads one, sg::Error (the initial weights are surely not what was meant).
config::CheckpointConfig checkpoint_to_evaluate(const config::CheckpointConfig& checkpoint);

// `loaded` or `pretrained` (or neither: the initial weights) go into `backend`, then one evaluation runs. Rank 0 (the
// writer) writes the result file. Returns its path ("" on the other ranks).
std::string evaluate_only(const config::Config& config, const TrainOptions& options, TrainingBackend& backend,
                          std::optional<LoadedCheckpoint>& loaded, std::optional<PretrainedStart>& pretrained,
                          const std::vector<Evaluation*>& evaluations, Evaluation& test_evaluation);

}  // namespace sg::train
