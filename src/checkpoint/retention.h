#pragma once
// Checkpoint retention (Megatron-Bridge's checkpoint.most_recent_k): after a save, the iteration folders of the save
// directory beyond the k newest are removed. Crash-safe: each folder is first renamed out of the iteration-name
// pattern, DIR/iter_0000100 -> DIR/iter_0000100.removing (so neither `latest`, list_iterations nor a resume can take a
// half-removed folder for a checkpoint), the directory fsynced, and only then removed. A removal a crash interrupted
// leaves a DIR/iter_NNNNNNN.removing folder, which the next pass removes (and checkpoint.overwrite's
// remove_checkpoints too).
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace sg::checkpoint {

inline constexpr const char* kRemovingSuffix = ".removing";

// "iter_0000100.removing": the name an iteration folder has while it is being removed.
std::string removal_dir_name(int64_t iteration);
// Whether NAME (a file name in a save directory) is a folder of an interrupted removal: iter_NNNNNNN.removing.
bool is_removal_leftover(const std::string& name);

// Test hooks: on_stage runs before each step of a folder's removal, with the stage and the path it acts on:
// "rename" (DIR/iter_N, about to be renamed to DIR/iter_N.removing) and "remove" (DIR/iter_N.removing, about to be
// removed; also for the leftovers of an interrupted removal). A hook that throws fails that folder's removal (its
// message is the reason); one that kills the process is a crash there.
struct RetentionHooks {
  std::function<void(const std::string& stage, const std::string& path)> on_stage;
};

struct RetentionResult {
  std::vector<int64_t> removed;        // iterations whose folders were removed, ascending
  std::vector<int64_t> kept;           // iterations whose folders stay, ascending
  std::vector<std::string> leftovers;  // interrupted removals' folders removed now (names in DIR)
  std::vector<std::string> failures;   // "PATH: reason", one a folder not removed (it stays for the next pass)
};

// Keeps DIR's `keep` newest iteration folders, the folder its latest file names, and the iterations in `pinned`;
// removes every other iteration folder. `keep` < 1 keeps every folder. Leftovers of interrupted removals are removed
// first, in any case. Without a readable latest file nothing is removed but leftovers (a failure says why): this runs
// after a save, which wrote it. Never throws for a folder it could not remove: each such folder is a failure, and
// the others are still removed. Run by the process that holds DIR's lock (save_dir_lock.h), after its save.
RetentionResult remove_old_iterations(const std::string& dir, int64_t keep, const std::vector<int64_t>& pinned = {},
                                      const RetentionHooks& hooks = {});

}  // namespace sg::checkpoint
