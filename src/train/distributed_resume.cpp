#include "train/distributed_resume.h"

#include "core/error.h"
#include "core/strings.h"
#include "train/distributed_run.h"

namespace sg::train {

std::optional<ResumeFolder> resume_folder_everywhere(DistributedRun& run, const std::optional<std::string>& resume_from,
                                                     const std::string& what) {
  std::optional<ResumeFolder> mine;  // rank 0's, with its note
  const std::string folder = run.broadcast_from_rank0("resume_folder", [&] {
    if (!resume_from) return std::string("-");
    mine = find_resume_folder(*resume_from, what);
    return "+" + mine->path;
  });
  if (run.is_writer()) return mine;
  if (folder.size() < 2 || folder[0] != '+') return std::nullopt;
  return ResumeFolder{.path = folder.substr(1), .note = ""};
}

LoadedCheckpoint load_resume_folder(const DistributedRun& run, const std::string& folder,
                                    const std::function<LoadedCheckpoint()>& load) {
  if (run.is_writer()) return load();
  try {
    return load();
  } catch (const Error& e) {
    throw Error(
        strprintf("rank %d cannot load %s, the checkpoint rank 0 resumes (every rank loads the folder rank 0 "
                  "chose: checkpoint.save and checkpoint.load must be on a filesystem every rank sees, with "
                  "the same files): %s",
                  run.rank(), folder.c_str(), e.what()));
  }
}

std::string describe_resumed(const std::optional<LoadedCheckpoint>& loaded) {
  if (!loaded) return "nothing";
  return strprintf("step %lld, train_state.json CRC-32 %s", static_cast<long long>(loaded->state.steps_done),
                   loaded->train_state_crc.c_str());
}

void require_same_resume(DistributedRun& run, const std::optional<LoadedCheckpoint>& loaded) {
  run.require_same("resume_loaded", describe_resumed(loaded),
                   "the checkpoint each rank resumed" + (loaded ? " from " + loaded->path : std::string()) +
                       " (every rank must read the same files: checkpoint.save and checkpoint.load on a filesystem "
                       "every rank sees)");
}

}  // namespace sg::train
