#include "train/run_folder.h"

#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <system_error>

#include "core/error.h"
#include "core/strings.h"
#include "train/svg_chart.h"

namespace sg::train {

namespace fs = std::filesystem;

namespace {
constexpr const char* kRunFile = "run.json";

// A metrics.jsonl with at least one byte: a run that finished a step.
bool has_records(const fs::path& dir) {
  std::error_code ec;
  const auto size = fs::file_size(dir / "metrics.jsonl", ec);
  return !ec && size > 0;
}
}  // namespace

std::string new_run_id() {
  const std::time_t now = std::chrono::system_clock::to_time_t(std::chrono::system_clock::now());
  std::tm utc{};
  gmtime_r(&now, &utc);
  char stamp[32];
  std::strftime(stamp, sizeof(stamp), "%Y%m%dT%H%M%SZ", &utc);
  std::random_device random;
  return strprintf("%s-%d-%08x", stamp, static_cast<int>(::getpid()), static_cast<unsigned>(random()));
}

std::optional<std::string> read_run_id(const std::string& run_dir) {
  std::ifstream in(fs::path(run_dir) / kRunFile);
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  const nlohmann::json j = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("run_id") || !j["run_id"].is_string()) return std::nullopt;
  return j["run_id"].get<std::string>();
}

void write_run_id(const std::string& run_dir, const std::string& run_id) {
  const nlohmann::json j = {{"run_id", run_id}};
  write_text_atomically((fs::path(run_dir) / kRunFile).string(), j.dump() + "\n");
}

std::optional<std::string> keep_earlier_run(const std::string& run_dir) {
  const fs::path dir(run_dir);
  if (!has_records(dir)) return std::nullopt;

  std::error_code ec;
  fs::path archive;
  for (int k = 1;; ++k) {
    archive = dir / "previous" / strprintf("run-%d", k);
    if (!fs::exists(archive, ec)) break;
  }
  fs::create_directories(archive, ec);
  if (ec) {
    throw Error(strprintf("%s holds an earlier run's metrics.jsonl, which this run keeps by moving it to %s, but "
                          "that folder cannot be created: %s. Free the disk or fix the permissions, or choose "
                          "another --run-dir",
                          run_dir.c_str(), archive.string().c_str(), ec.message().c_str()));
  }
  for (const char* name : kRunFolderFiles) {
    const fs::path from = dir / name;
    if (!fs::exists(from, ec)) continue;
    fs::rename(from, archive / name, ec);
    if (ec) {
      throw Error(strprintf("cannot move the earlier run's %s to %s: %s. Fix the permissions, or choose another "
                            "--run-dir",
                            from.string().c_str(), archive.string().c_str(), ec.message().c_str()));
    }
  }
  return archive.string();
}

namespace {

// The latest previous/run-<k>/ whose run.json names `run_id`.
std::optional<fs::path> find_archived_run(const fs::path& dir, const std::string& run_id) {
  std::optional<fs::path> found;
  int found_k = 0;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir / "previous", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("run-", 0) != 0) continue;
    const int k = std::atoi(name.c_str() + 4);
    if (k > found_k && read_run_id(entry.path().string()) == run_id) found = entry.path(), found_k = k;
  }
  return found;
}

void restore_archived_run(const fs::path& archive, const fs::path& dir) {
  std::error_code ec;
  for (const char* name : kRunFolderFiles) {
    if (!fs::exists(archive / name, ec)) continue;
    fs::rename(archive / name, dir / name, ec);
    if (ec) {
      throw Error(strprintf("cannot move %s back to %s: %s. Fix the permissions, or choose another --run-dir",
                            (archive / name).string().c_str(), dir.string().c_str(), ec.message().c_str()));
    }
  }
  fs::remove(archive, ec);  // empty now; a file someone added keeps it
}

}  // namespace

RunFolderStart start_run_folder(const std::string& run_dir, const std::optional<std::string>& checkpoint_run_id) {
  RunFolderStart start;
  if (checkpoint_run_id) {
    const std::optional<std::string> folder_run_id = read_run_id(run_dir);
    // Its own run's folder, or a checkpoint or a folder with records from before run ids: continue.
    start.continues = checkpoint_run_id->empty() || folder_run_id == *checkpoint_run_id ||
                      (!folder_run_id && has_records(run_dir));
    if (start.continues) return start;
  }
  start.archived_to = keep_earlier_run(run_dir);
  if (checkpoint_run_id) {
    if (const auto own = find_archived_run(run_dir, *checkpoint_run_id)) {
      restore_archived_run(*own, run_dir);
      start.restored_from = own->string();
      start.continues = true;
    }
  }
  return start;
}

std::optional<std::string> run_folder_of_config(const std::string& yaml_path) {
  const fs::path path(yaml_path);
  std::error_code ec;
  if (path.filename() != "config.yaml" || !fs::is_regular_file(path.parent_path() / kRunFile, ec)) return std::nullopt;
  fs::path folder = path.parent_path();
  if (folder.empty()) folder = ".";
  // An archived run (runs/x/previous/run-<k>/) belongs to runs/x, whose start brings its records back.
  const fs::path parent = folder.lexically_normal().parent_path();
  if (parent.filename() == "previous" && folder.lexically_normal().filename().string().rfind("run-", 0) == 0) {
    folder = parent.parent_path().empty() ? fs::path(".") : parent.parent_path();
  }
  return folder.string();
}

}  // namespace sg::train
