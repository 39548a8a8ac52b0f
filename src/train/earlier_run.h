#pragma once
// A fresh run never replaces the records of an earlier run in its run folder. Running the same recipe
// twice writes to the same runs/<name>/; when that folder's metrics.jsonl already holds records and the
// new run does not resume from a checkpoint, the earlier run's files (config.yaml, metrics.jsonl,
// report.html) move to runs/<name>/previous/run-<k>/ (k: the first number not taken) before the new run
// writes its own. The folder's top level is always the latest run; nothing is deleted. (A resumed run
// appends, and cuts metrics.jsonl back to its checkpoint's step: train/metrics.h.)
#include <optional>
#include <string>

namespace sg::train {

// The files a run leaves in its folder, which move together.
inline constexpr const char* kRunFolderFiles[] = {"config.yaml", "metrics.jsonl", "report.html"};

// Moves the earlier run's files aside; returns the folder they went to, or nullopt when `run_dir` holds no
// records (no metrics.jsonl, or an empty one: a run that ended before its first step). sg::Error naming the
// file and the fix when a file cannot be moved.
std::optional<std::string> keep_earlier_run(const std::string& run_dir);

}  // namespace sg::train
