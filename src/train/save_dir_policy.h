#pragma once
// What a run does with checkpoint.save and checkpoint.load, decided before anything trains:
//   * checkpoint.save is locked for the run (checkpoint/save_dir_lock.h) and probed for writability;
//   * a checkpoint.save that already holds checkpoints belongs to a run: it is resumed when
//     checkpoint.load names it (Bridge's "load = save" idiom) or checkpoint.auto_resume is set, wiped
//     when checkpoint.overwrite is set, and otherwise the run is refused with a message naming the
//     three options. So a fresh run never replaces another run's iterations, and `latest` never moves
//     backwards over iterations left behind;
//   * checkpoint.overwrite removes them only right before the run's first save (remove_overwritten_checkpoints),
//     so a run refused or failed before it (a mistyped checkpoint.load, a damaged or mismatched checkpoint, a NaN,
//     a stop before any save writes nothing) removes nothing;
//   * checkpoint.most_recent_k removes the iteration folders beyond the k newest after each save
//     (apply_checkpoint_retention);
//   * checkpoint.save is never checkpoint.pretrained_checkpoint's folder (its latest file would make that folder
//     name the fine-tuned weights), nor, with checkpoint.overwrite, a folder holding it.
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/retention.h"
#include "checkpoint/save_dir_lock.h"
#include "config/config.h"

namespace sg::train {

struct CheckpointDirs {
  checkpoint::SaveDirLock save_lock;       // held while the run lives (not held without checkpoint.save)
  std::optional<std::string> resume_from;  // the checkpoint to load, if any
  std::string note;                        // one line for the log ("" when nothing to say)
  // checkpoint.overwrite: checkpoint.save's checkpoints, still there, to remove before the first save.
  std::optional<std::string> overwrite_pending;
};

// sg::Error for every refusal, naming the directories and the keys that resolve it. Removes nothing.
CheckpointDirs prepare_checkpoint_dirs(const config::CheckpointConfig& checkpoint);

// Whether prepare_checkpoint_dirs(checkpoint) can name a checkpoint to resume, before any folder is looked at:
// checkpoint.load is set, or checkpoint.auto_resume with checkpoint.save (every data-parallel rank loads it).
bool may_resume(const config::CheckpointConfig& checkpoint);

// checkpoint.overwrite, at the run's first save (its state already checked finite): removes what
// checkpoint.save holds and returns the line for the log; "" when no removal is pending (done once).
std::string remove_overwritten_checkpoints(CheckpointDirs& dirs);

// checkpoint.most_recent_k, right after a save into checkpoint.save (whose latest file then names the new folder):
// removes its iteration folders beyond the k newest (checkpoint/retention.h: each renamed out of the iteration-name
// pattern first, so a crash never leaves a half folder that a resume could take for a checkpoint), never the folder
// `latest` names nor one that holds checkpoint.pretrained_checkpoint (every resume reads its config.json again). With
// any k (-1 too) it removes the leftovers of a removal a crash interrupted. Never throws: a folder it cannot remove is
// a warning (the save itself succeeded; the next save tries again). The writing rank alone runs it, inside its write
// (data parallel: DistributedRun::save_everywhere's barrier covers it). `hooks`: tests inject failures and crashes.
struct RetentionOutcome {
  std::string line;                   // one line for the log: what was removed ("" when nothing was)
  std::vector<std::string> warnings;  // one a folder that could not be removed: its path and the reason
};
RetentionOutcome apply_checkpoint_retention(const config::CheckpointConfig& checkpoint,
                                            const checkpoint::RetentionHooks& hooks = {});

// The key that named the checkpoint a run resumes, for messages: "checkpoint.load", or
// "checkpoint.auto_resume (checkpoint.save)" when auto_resume resumed checkpoint.save without checkpoint.load.
std::string resume_key(const config::CheckpointConfig& checkpoint);

}  // namespace sg::train
