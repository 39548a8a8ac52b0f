#pragma once
// Data parallel resume: every rank loads the one checkpoint rank 0 chose, and they check that they did.
//
// Rank 0 owns checkpoint.save (its lock and policy, train/save_dir_policy.h) and resolves the folder to resume
// itself: a save directory's latest file, or its newest iteration folder (find_resume_folder). Ranks that each
// resolved the directory for themselves could resume from different steps without a word (a node-local
// checkpoint.save, a latest file replaced in between by a save still under way) and then wait a day in each
// other's stop agreements of different steps.
#include <functional>
#include <optional>
#include <string>

#include "train/checkpointing.h"

namespace sg::train {

class DistributedRun;

// On every rank: the iteration folder rank 0 resolved from its `resume_from` (the other ranks' is not read), with
// find_resume_folder's note on rank 0 only; nullopt when rank 0 resumes nothing. sg::Error on rank 0 when its
// resume_from names no checkpoint (the others end when it reports that). `what`: the key that named resume_from.
std::optional<ResumeFolder> resume_folder_everywhere(DistributedRun& run, const std::optional<std::string>& resume_from,
                                                     const std::string& what);

// `load()` of `folder` (rank 0's choice) on this rank. On another rank than 0 an sg::Error it throws says that the
// folder is rank 0's, which every rank must read: checkpoint.save on a filesystem every rank sees.
LoadedCheckpoint load_resume_folder(const DistributedRun& run, const std::string& folder,
                                    const std::function<LoadedCheckpoint()>& load);

// What a rank resumed, as the ranks compare it: "step N, train_state.json CRC-32 xxxxxxxx" or "nothing".
std::string describe_resumed(const std::optional<LoadedCheckpoint>& loaded);

// After every rank loaded (or not): sg::Error on every rank, naming each rank's step and train_state.json checksum,
// unless all resumed the same checkpoint.
void require_same_resume(DistributedRun& run, const std::optional<LoadedCheckpoint>& loaded);

}  // namespace sg::train
