#include "train/save_dir_policy.h"

#include <algorithm>
#include <filesystem>

#include "checkpoint/checkpoint_dir.h"
#include "core/error.h"
#include "core/paths.h"
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
  std::string text = iterations.empty()
                         ? "no iteration folders"
                         : "iteration" + std::string(iterations.size() > 1 ? "s " : " ") + join(shown, ", ");
  try {
    if (const auto latest = checkpoint::read_latest_iteration(dir)) {
      text += strprintf(" (latest %lld)", static_cast<long long>(*latest));
    }
  } catch (const Error&) {
    text += " (an unreadable latest file)";
  }
  return text;
}

// Whether `path` is `dir` or lies below it (both normalized).
bool is_within(const fs::path& path, const fs::path& dir) {
  auto p = path.begin();
  for (auto d = dir.begin(); d != dir.end(); ++d, ++p) {
    if (p == path.end() || *p != *d) return false;
  }
  return true;
}

// The iteration of an iter_NNNNNNN folder (its train_state.json may not be read yet), or -1.
long long loaded_iteration(const std::string& folder) {
  const std::string name = normalized_directory(folder).filename().string();
  if (name.rfind("iter_", 0) != 0 || name.size() <= 5) return -1;
  try {
    return std::stoll(name.substr(5));
  } catch (const std::exception&) {
    return -1;
  }
}

// checkpoint.load names one of save's iteration folders: resuming it is continuing that run only
// when it is the latest (an older one would leave the abandoned later iterations behind), or the newest
// folder when `latest` lags behind it (a save killed after renaming its folder into place and before
// writing `latest`: that folder is whole, and loading verifies it).
void check_resume_inside_save(const std::string& load, const std::string& save) {
  const std::string folder = checkpoint::resolve_checkpoint(load);
  const auto latest = checkpoint::read_latest_iteration(save);
  const fs::path save_path = normalized_directory(save);
  if (latest && normalized_directory(folder) == save_path / checkpoint::iteration_dir_name(*latest)) return;
  const std::vector<int64_t> iterations = checkpoint::list_iterations(save);
  if (!iterations.empty() && (!latest || iterations.back() > *latest) &&
      normalized_directory(folder) == save_path / checkpoint::iteration_dir_name(iterations.back())) {
    return;
  }
  throw Error(
      strprintf("checkpoint.load %s is an older iteration of checkpoint.save %s (which holds %s): continuing to save "
                "there would mix the abandoned later iterations with the new ones and move `latest` backwards. Save "
                "the branch into another directory (checkpoint.save=NEW_DIR), or first delete the later iterations "
                "and write %lld into %s/%s",
                load.c_str(), save.c_str(), contents_text(save).c_str(),
                static_cast<long long>(loaded_iteration(folder)), save.c_str(), checkpoint::kLatestFile));
}

// checkpoint.save must not be the folder the pretrained weights come from: the run's latest file would make it a
// checkpoint root, which names the fine-tuned weights instead of its own to every later reader (generate,
// pretrained_checkpoint). Checked before the lock, which would already write DIR/.lock into it.
void check_save_is_not_pretrained(const config::CheckpointConfig& c) {
  if (!c.pretrained_checkpoint || c.pretrained_checkpoint->empty()) return;
  const fs::path save_path = normalized_directory(*c.save);
  const fs::path pretrained = normalized_directory(*c.pretrained_checkpoint);
  if (pretrained == save_path) {
    throw Error(strprintf(
        "checkpoint.save %s is checkpoint.pretrained_checkpoint %s: the run would save its iterations and its latest "
        "file into the folder it starts from, which would then name the fine-tuned weights instead of its own. "
        "Choose another checkpoint.save (checkpoint.save=NEW_DIR)",
        c.save->c_str(), c.pretrained_checkpoint->c_str()));
  }
  // checkpoint.overwrite deletes save's iteration folders: one of them may be the pretrained weights.
  if (c.overwrite && is_within(pretrained, save_path)) {
    throw Error(strprintf(
        "checkpoint.overwrite=true would delete checkpoint.pretrained_checkpoint %s: it lies inside checkpoint.save "
        "%s. Nothing was removed. Choose another checkpoint.save (checkpoint.save=NEW_DIR), or copy the pretrained "
        "folder elsewhere first",
        c.pretrained_checkpoint->c_str(), c.save->c_str()));
  }
}

// What a run that resumes nothing starts from, for the notes.
std::string fresh_start(const config::CheckpointConfig& c) {
  return c.pretrained_checkpoint ? "starting from checkpoint.pretrained_checkpoint " + *c.pretrained_checkpoint
                                 : std::string("starting from scratch");
}

}  // namespace

CheckpointDirs prepare_checkpoint_dirs(const config::CheckpointConfig& c) {
  CheckpointDirs out;
  if (!c.save) {
    out.resume_from = c.load;
    return out;
  }
  const std::string& save = *c.save;
  check_save_is_not_pretrained(c);
  out.save_lock = checkpoint::SaveDirLock::acquire(save, "checkpoint.save");
  checkpoint::check_directory_writable(save, "checkpoint.save");
  const bool occupied = checkpoint::holds_checkpoints(save);
  const fs::path save_path = normalized_directory(save);
  const fs::path load_path = c.load ? normalized_directory(*c.load) : fs::path();

  if (c.load && load_path == save_path) {  // Bridge's idiom: load = save continues the run
    if (occupied) {
      out.resume_from = save;
    } else {
      out.note = "checkpoint.load = checkpoint.save = " + save + " holds no checkpoint yet: " + fresh_start(c);
    }
    return out;
  }
  if (c.load && occupied && load_path.parent_path() == save_path) {
    check_resume_inside_save(*c.load, save);
    out.resume_from = c.load;
    return out;
  }
  if (!occupied) {
    out.resume_from = c.load;
    if (!c.load && c.auto_resume) {
      out.note = "checkpoint.auto_resume: " + save + " holds no checkpoint yet: " + fresh_start(c);
    }
    return out;
  }
  if (!c.load && c.auto_resume) {
    out.resume_from = save;
    return out;
  }
  if (c.overwrite) {
    // Never delete the checkpoint this run is about to load (whatever path spelling reached here).
    if (c.load && is_within(load_path, save_path)) {
      throw Error(strprintf(
          "checkpoint.overwrite=true would delete checkpoint.load %s: it lies inside checkpoint.save %s (which "
          "holds %s). Nothing was removed. Save into another directory (checkpoint.save=NEW_DIR), or load the "
          "latest iteration (checkpoint.load=%s) without checkpoint.overwrite",
          c.load->c_str(), save.c_str(), contents_text(save).c_str(), save.c_str()));
    }
    // Removed at the first save, not now: everything that can refuse the run (checkpoint.load's path, checksums
    // and shapes, the data, the backend) comes first, and a run that fails before saving removes nothing.
    out.resume_from = c.load;
    out.overwrite_pending = save;
    out.note = "checkpoint.overwrite: " + save + " holds " + contents_text(save) +
               "; they stay until this run's first save, which removes them first";
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

bool may_resume(const config::CheckpointConfig& c) {
  return c.load.has_value() || (c.save && c.auto_resume);
}

std::string remove_overwritten_checkpoints(CheckpointDirs& dirs) {
  if (!dirs.overwrite_pending) return "";
  const std::string save = *dirs.overwrite_pending;
  const std::string before = contents_text(save);
  const bool any = checkpoint::holds_checkpoints(save);
  checkpoint::remove_checkpoints(save);
  dirs.overwrite_pending.reset();
  return any ? "checkpoint.overwrite: removed " + before + " from " + save + " before this run's first save"
             : std::string();
}

namespace {

// "iter_0000100, iter_0000200": folder names; of more than four, the first and the last two.
std::string folder_list_text(const std::vector<std::string>& names) {
  if (names.size() <= 4) return join(names, ", ");
  return names.front() + ", ..., " + names[names.size() - 2] + ", " + names.back();
}

std::vector<std::string> folder_names(const std::vector<int64_t>& iterations) {
  std::vector<std::string> out;
  for (const int64_t it : iterations) out.push_back(checkpoint::iteration_dir_name(it));
  return out;
}

}  // namespace

RetentionOutcome apply_checkpoint_retention(const config::CheckpointConfig& c,
                                            const checkpoint::RetentionHooks& hooks) {
  RetentionOutcome out;
  if (!c.save) return out;
  const std::string& save = *c.save;
  const int64_t k = c.most_recent_k;
  const std::string who =
      k >= 1 ? strprintf("checkpoint.most_recent_k=%lld", static_cast<long long>(k)) : "checkpoint.save " + save;
  const std::string after =
      " The save itself succeeded and the run goes on; the next save tries again (or remove "
      "the folder by hand).";
  try {
    // A resume reads checkpoint.pretrained_checkpoint's config.json again (train/checkpointing.h): the iteration
    // folder holding it stays.
    std::vector<int64_t> pinned;
    if (k >= 1 && c.pretrained_checkpoint && !c.pretrained_checkpoint->empty()) {
      const fs::path pretrained = normalized_directory(*c.pretrained_checkpoint);
      const fs::path save_path = normalized_directory(save);
      for (const int64_t it : checkpoint::list_iterations(save)) {
        if (is_within(pretrained, save_path / checkpoint::iteration_dir_name(it))) pinned.push_back(it);
      }
    }
    const checkpoint::RetentionResult r = checkpoint::remove_old_iterations(save, k, pinned, hooks);
    std::vector<std::string> parts;
    if (!r.removed.empty()) {
      std::string kept = "kept " + folder_list_text(folder_names(r.kept));
      // A pinned folder older than the k newest stays only because of the pretrained weights: said.
      for (const int64_t it : pinned) {
        const auto pos = std::find(r.kept.begin(), r.kept.end(), it);
        if (pos != r.kept.end() && r.kept.end() - pos > k) {
          kept += "; " + checkpoint::iteration_dir_name(it) + " holds checkpoint.pretrained_checkpoint";
        }
      }
      parts.push_back("removed " + folder_list_text(folder_names(r.removed)) + " from " + save + " (" + kept + ")");
    }
    if (!r.leftovers.empty()) {
      // A crash, or a failure a warning named, in an earlier pass.
      parts.push_back(std::string(r.removed.empty() ? "removed " : "and ") + folder_list_text(r.leftovers) +
                      ", left by an earlier removal that did not finish" +
                      (r.removed.empty() ? ", from " + save : std::string()));
    }
    if (!parts.empty()) out.line = who + ": " + join(parts, "; ");
    for (const std::string& failure : r.failures) out.warnings.push_back(who + ": " + failure + "." + after);
  } catch (const std::exception& e) {
    out.warnings.push_back(who + ": " + e.what() + "." + after);
  }
  return out;
}

std::string resume_key(const config::CheckpointConfig& c) {
  return c.load ? std::string("checkpoint.load") : std::string("checkpoint.auto_resume (checkpoint.save)");
}

}  // namespace sg::train
