#include "checkpoint/retention.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <optional>

#include "checkpoint/checkpoint_dir.h"
#include "checkpoint/durable_io.h"
#include "core/error.h"
#include "core/strings.h"

namespace sg::checkpoint {

namespace fs = std::filesystem;

std::string removal_dir_name(int64_t iteration) {
  return iteration_dir_name(iteration) + kRemovingSuffix;
}

bool is_removal_leftover(const std::string& name) {
  const std::string suffix = kRemovingSuffix;
  if (name.size() <= suffix.size() || name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) {
    return false;
  }
  const std::string base = name.substr(0, name.size() - suffix.size());
  if (base.size() < 6 || base.rfind("iter_", 0) != 0) return false;
  return std::all_of(base.begin() + 5, base.end(), [](char c) { return c >= '0' && c <= '9'; });
}

namespace {

// One step of a folder's removal: the stage's hook, then `op`. A failure of either is recorded as
// "cannot WHAT: reason" and returns false; nothing throws past here.
template <class Op>
bool attempt(const RetentionHooks& hooks, const char* stage, const std::string& path, const std::string& what,
             std::vector<std::string>& failures, Op&& op) {
  try {
    if (hooks.on_stage) hooks.on_stage(stage, path);
    op();
    return true;
  } catch (const std::exception& e) {
    failures.push_back("cannot " + what + ": " + e.what());
    return false;
  }
}

void remove_folder(const std::string& path) {
  std::error_code ec;
  fs::remove_all(path, ec);
  if (ec) throw Error(ec.message());
}

void rename_folder(const std::string& from, const std::string& to) {
  if (std::rename(from.c_str(), to.c_str()) != 0) throw Error(std::strerror(errno));
}

}  // namespace

RetentionResult remove_old_iterations(const std::string& dir, int64_t keep, const std::vector<int64_t>& pinned,
                                      const RetentionHooks& hooks) {
  RetentionResult out;
  // Leftovers of a removal a crash interrupted: they are no checkpoint any more (renamed before a byte was removed).
  std::vector<std::string> leftovers;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (is_removal_leftover(name)) leftovers.push_back(name);
  }
  std::sort(leftovers.begin(), leftovers.end());
  for (const std::string& name : leftovers) {
    const std::string path = dir + "/" + name;
    if (attempt(hooks, "remove", path, "remove " + path, out.failures, [&] { remove_folder(path); })) {
      out.leftovers.push_back(name);
    }
  }

  const std::vector<int64_t> iterations = list_iterations(dir);
  std::vector<int64_t> doomed;
  if (keep >= 1 && static_cast<int64_t>(iterations.size()) > keep) {
    std::optional<int64_t> latest;
    try {
      latest = read_latest_iteration(dir);
      if (!latest) {
        out.failures.push_back(
            strprintf("no iteration folder removed: %s/%s is missing, so which one is the newest "
                      "whole checkpoint is unknown",
                      dir.c_str(), kLatestFile));
      }
    } catch (const std::exception& e) {
      out.failures.push_back(std::string("no iteration folder removed: ") + e.what());
    }
    if (latest) {
      const auto first_kept = iterations.end() - keep;
      for (auto it = iterations.begin(); it != first_kept; ++it) {
        const bool pin = *it == *latest || std::find(pinned.begin(), pinned.end(), *it) != pinned.end();
        if (!pin) doomed.push_back(*it);
      }
    }
  }

  // First out of the iteration-name pattern, all of them, and the rename made durable; only then is a byte removed,
  // so a crash in the middle leaves *.removing folders, never a half iteration folder.
  std::vector<int64_t> renamed;
  for (const int64_t iteration : doomed) {
    const std::string from = dir + "/" + iteration_dir_name(iteration);
    const std::string to = dir + "/" + removal_dir_name(iteration);
    if (attempt(hooks, "rename", from, "rename " + from + " to " + to, out.failures,
                [&] { rename_folder(from, to); })) {
      renamed.push_back(iteration);
    }
  }
  bool synced = true;
  if (!renamed.empty()) {
    try {
      fsync_directory(dir);
    } catch (const std::exception& e) {
      // Not known to be durable: removing now could leave a half folder under its iteration name after a crash.
      synced = false;
      out.failures.push_back(std::string(e.what()) + "; the folders renamed to *" + kRemovingSuffix +
                             " are removed by the next save");
    }
  }
  if (synced) {
    for (const int64_t iteration : renamed) {
      const std::string path = dir + "/" + removal_dir_name(iteration);
      if (attempt(hooks, "remove", path, "remove " + path, out.failures, [&] { remove_folder(path); })) {
        out.removed.push_back(iteration);
      }
    }
  }
  for (const int64_t iteration : iterations) {
    if (std::find(renamed.begin(), renamed.end(), iteration) == renamed.end()) out.kept.push_back(iteration);
  }
  if (!out.removed.empty() || !out.leftovers.empty()) {
    try {
      fsync_directory(dir);
    } catch (const std::exception& e) {
      out.failures.push_back(e.what());
    }
  }
  return out;
}

}  // namespace sg::checkpoint
