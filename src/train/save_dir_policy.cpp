#include "train/save_dir_policy.h"

#include <filesystem>

#include "checkpoint/checkpoint_dir.h"
#include "core/error.h"
#include "core/strings.h"

namespace sg::train {

namespace fs = std::filesystem;

namespace {

// "iterations 5, 10 (latest 10)" for messages.
std::string contents_text(const std::string& dir) {
  const auto iterations = checkpoint::list_iterations(dir);
  std::vector<std::string> shown;
  for (size_t i = 0; i < iterations.size(); ++i) {
    if (iterations.size() > 6 && i == 3) {
      shown.push_back("...");
      i = iterations.size() - 3;
    }
    shown.push_back(std::to_string(iterations[i]));
  }
  std::string text = iterations.empty() ? "no iteration folders" : "iteration" + std::string(iterations.size() > 1 ? "s " : " ") + join(shown, ", ");
  try {
    if (const auto latest = checkpoint::read_latest_iteration(dir)) text += strprintf(" (latest %lld)", static_cast<long long>(*latest));
  } catch (const Error&) {
    text += " (an unreadable latest file)";
  }
  return text;
}

// checkpoint.load names one of save's iteration folders: resuming it is continuing that run only
// when it is the latest (an older one would leave the abandoned later iterations behind).
void check_resume_inside_save(const std::string& load, const std::string& save) {
  const std::string folder = checkpoint::resolve_checkpoint(load);
  const auto latest = checkpoint::read_latest_iteration(save);
  if (latest && checkpoint::same_directory(folder, save + "/" + checkpoint::iteration_dir_name(*latest))) return;
  throw Error(strprintf(
      "checkpoint.load %s is an older iteration of checkpoint.save %s (which holds %s): continuing to save "
      "there would mix the abandoned later iterations with the new ones and move `latest` backwards. Save "
      "the branch into another directory (checkpoint.save=NEW_DIR), or delete the later iterations first",
      load.c_str(), save.c_str(), contents_text(save).c_str()));
}

}  // namespace

CheckpointDirs prepare_checkpoint_dirs(const config::CheckpointConfig& c) {
  CheckpointDirs out;
  if (!c.save) {
    out.resume_from = c.load;
    return out;
  }
  const std::string& save = *c.save;
  out.save_lock = checkpoint::SaveDirLock::acquire(save, "checkpoint.save");
  checkpoint::check_directory_writable(save, "checkpoint.save");
  const bool occupied = checkpoint::holds_checkpoints(save);

  if (c.load && checkpoint::same_directory(*c.load, save)) {  // Bridge's idiom: load = save continues the run
    if (occupied) {
      out.resume_from = save;
    } else {
      out.note = "checkpoint.load = checkpoint.save = " + save + " holds no checkpoint yet: starting from scratch";
    }
    return out;
  }
  if (c.load && occupied && checkpoint::same_directory(fs::path(*c.load).parent_path().string(), save)) {
    check_resume_inside_save(*c.load, save);
    out.resume_from = c.load;
    return out;
  }
  if (!occupied) {
    out.resume_from = c.load;
    if (!c.load && c.auto_resume) out.note = "checkpoint.auto_resume: " + save + " holds no checkpoint yet: starting from scratch";
    return out;
  }
  if (!c.load && c.auto_resume) {
    out.resume_from = save;
    return out;
  }
  if (c.overwrite) {
    const std::string before = contents_text(save);
    checkpoint::remove_checkpoints(save);
    out.resume_from = c.load;
    out.note = "checkpoint.overwrite: removed " + before + " from " + save;
    return out;
  }
  if (c.load) {
    throw Error(strprintf(
        "checkpoint.save %s already holds the checkpoints of another run (%s), and this run resumes from "
        "checkpoint.load %s: saving there would mix two runs. Choose an empty checkpoint.save, or set "
        "checkpoint.overwrite=true to delete them",
        save.c_str(), contents_text(save).c_str(), c.load->c_str()));
  }
  throw Error(strprintf(
      "checkpoint.save %s already holds checkpoints (%s). To continue that run set checkpoint.load=%s (or "
      "checkpoint.auto_resume=true); to delete them and start over set checkpoint.overwrite=true; or choose "
      "another checkpoint.save",
      save.c_str(), contents_text(save).c_str(), save.c_str()));
}

}  // namespace sg::train
