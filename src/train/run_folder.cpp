#include "train/run_folder.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <nlohmann/json.hpp>
#include <random>
#include <sstream>
#include <string_view>
#include <system_error>

#include "checkpoint/durable_io.h"
#include "core/error.h"
#include "core/log.h"
#include "core/strings.h"
#include "train/metrics.h"
#include "train/svg_chart.h"

namespace sg::train {

namespace fs = std::filesystem;

namespace {
// A metrics.jsonl with at least one byte: a run that finished a step.
bool has_records(const fs::path& dir) {
  std::error_code ec;
  const auto size = fs::file_size(dir / kMetricsJsonl, ec);
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
  std::ifstream in(fs::path(run_dir) / kRunJson);
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  const nlohmann::json j = nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (!j.is_object() || !j.contains("run_id") || !j["run_id"].is_string()) return std::nullopt;
  return j["run_id"].get<std::string>();
}

void write_run_id(const std::string& run_dir, const std::string& run_id) {
  const nlohmann::json j = {{"run_id", run_id}};
  checkpoint::write_file_atomically((fs::path(run_dir) / kRunJson).string(), j.dump() + "\n");
}

namespace {
// A new previous/run-<k>/ (k: the first number not taken), created; `why` says whose files go there.
fs::path new_archive(const std::string& run_dir, const char* why) {
  const fs::path dir(run_dir);
  std::error_code ec;
  fs::path archive;
  for (int k = 1;; ++k) {
    archive = dir / "previous" / strprintf("run-%d", k);
    if (!fs::exists(archive, ec)) break;
  }
  fs::create_directories(archive, ec);
  if (ec) {
    throw Error(strprintf("%s holds %s, which this run keeps in %s, but that folder cannot be created: %s. Free "
                          "the disk or fix the permissions, or choose another --run-dir",
                          run_dir.c_str(), why, archive.string().c_str(), ec.message().c_str()));
  }
  return archive;
}
}  // namespace

std::optional<std::string> keep_earlier_run(const std::string& run_dir) {
  const fs::path dir(run_dir);
  if (!has_records(dir)) return std::nullopt;

  std::error_code ec;
  const fs::path archive = new_archive(run_dir, "an earlier run's metrics.jsonl");
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
  if (path.filename() != kConfigYaml || !fs::is_regular_file(path.parent_path() / kRunJson, ec)) return std::nullopt;
  fs::path folder = path.parent_path();
  if (folder.empty()) folder = ".";
  // An archived run (runs/x/previous/run-<k>/) belongs to runs/x, whose start brings its records back.
  const fs::path parent = folder.lexically_normal().parent_path();
  if (parent.filename() == "previous" && folder.lexically_normal().filename().string().rfind("run-", 0) == 0) {
    folder = parent.parent_path().empty() ? fs::path(".") : parent.parent_path();
  }
  return folder.string();
}

namespace {

struct MetricsScan {
  size_t after = 0, damaged = 0;
  int64_t last_step = -1;
  bool step_recorded = false;
};

// Reads metrics.jsonl as truncate_metrics_after does: a line is a record when it parses and has a step. The lines
// that drops (later steps, and lines that are no record) go to `cut`, in order.
MetricsScan scan_metrics(const fs::path& path, int64_t step, const std::function<void(const std::string&)>& cut) {
  MetricsScan scan;
  std::ifstream in(path, std::ios::binary);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    const nlohmann::json j = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
    const bool record = j.is_object() && j.contains("step") && j["step"].is_number_integer() && j["step"] >= 0;
    const int64_t s = record ? j["step"].get<int64_t>() : -1;
    if (record && s <= step) {
      scan.step_recorded = scan.step_recorded || (s == step && j.contains("loss"));
      continue;
    }
    if (record) {
      ++scan.after;
      scan.last_step = std::max(scan.last_step, s);
    } else {
      ++scan.damaged;
    }
    cut(line);
  }
  return scan;
}

// The lines a cut drops, held until they pass kSpillBytes, then written to a temporary beside metrics.jsonl: a branch
// from an old checkpoint of a long run cuts most of the file (a line a step, ~270 bytes: GBs at 10M steps), which
// would otherwise be in host memory at the resume. Removed unless keep() moved it into an archive.
class CutLines {
 public:
  explicit CutLines(const fs::path& metrics) : spill_(strprintf("%s.cut-%d", metrics.c_str(), ::getpid())) {}
  ~CutLines() {
    writer_.reset();
    std::error_code ec;
    if (spilled_) fs::remove(spill_, ec);
  }
  CutLines(const CutLines&) = delete;
  CutLines& operator=(const CutLines&) = delete;

  void add(const std::string& line) {
    held_ += line;
    held_ += '\n';
    if (held_.size() < kSpillBytes) return;
    if (!writer_) {
      spilled_ = true;
      writer_.emplace(spill_.string(), 0);
    }
    writer_->write(held_.data(), held_.size());
    held_.clear();
  }
  // Writes them, durably, as `to`.
  void keep(const fs::path& to) {
    if (!writer_) return checkpoint::write_file_atomically(to.string(), held_);
    writer_->write(held_.data(), held_.size());
    writer_->close();
    writer_.reset();
    fs::rename(spill_, to);
    spilled_ = false;
    checkpoint::fsync_directory(to.parent_path().string());
  }

 private:
  static constexpr size_t kSpillBytes = size_t{4} << 20;
  fs::path spill_;
  std::string held_;
  std::optional<checkpoint::DurableFileWriter> writer_;
  bool spilled_ = false;
};

// Writes `archive`/`name` durably with `write`, `before` what would lose the folder's own copy: on failure that has
// not happened, and the error says so.
void keep_file(const std::string& run_dir, const fs::path& archive, const char* name,
               const std::function<void(const fs::path&)>& write, const char* before) {
  try {
    write(archive / name);
  } catch (const std::exception& e) {  // sg::Error, or a rename's std::filesystem::filesystem_error
    throw Error(strprintf("cannot keep %s's %s in %s before %s: %s. %s is as it was; free the disk or fix the "
                          "permissions, or choose another --run-dir",
                          run_dir.c_str(), name, archive.string().c_str(), before, e.what(), run_dir.c_str()));
  }
}

// Keeps the cut lines as previous/run-<k>/metrics.jsonl, with the config.yaml and report.html the resumed run
// replaces, each written durably. No run.json: these are not a run's whole records, so start_run_folder never
// brings them back as the records a resumed run continues.
std::string keep_cut_records(const std::string& run_dir, CutLines& cut_lines) {
  const fs::path archive = new_archive(run_dir, "records past the checkpoint's step");
  constexpr const char* before = "cutting its records back to the checkpoint";
  keep_file(
      run_dir, archive, kMetricsJsonl, [&](const fs::path& to) { cut_lines.keep(to); }, before);
  std::error_code ec;
  for (const char* name : {kConfigYaml, kReportHtml}) {
    const fs::path from = fs::path(run_dir) / name;
    if (!fs::exists(from, ec)) continue;
    keep_file(
        run_dir, archive, name,
        [&](const fs::path& to) {
          checkpoint::write_file_atomically(to.string(), checkpoint::read_text_file(from.string()));
        },
        before);
  }
  return archive.string();
}

}  // namespace

RecordsCut cut_records_after(const std::string& run_dir, int64_t step) {
  RecordsCut cut;
  const fs::path path = fs::path(run_dir) / kMetricsJsonl;
  std::error_code ec;
  if (!fs::exists(path, ec)) return cut;  // no records to cut (nor a line lost)
  CutLines cut_lines(path);
  MetricsScan scan;
  try {
    scan = scan_metrics(path, step, [&](const std::string& line) { cut_lines.add(line); });
  } catch (const Error& e) {  // the temporary the cut lines spill into could not be written
    throw Error(
        strprintf("cannot keep %s's records past step %lld before cutting them: %s. %s is as it was; free "
                  "the disk or fix the permissions, or choose another --run-dir",
                  run_dir.c_str(), static_cast<long long>(step), e.what(), run_dir.c_str()));
  }
  cut.records_after = scan.after;
  cut.last_step = scan.last_step;
  cut.damaged_lines = scan.damaged;
  cut.step_recorded = step == 0 || scan.step_recorded;
  if (scan.after > 0) cut.kept_in = keep_cut_records(run_dir, cut_lines);  // before a byte of them is cut
  if (scan.after > 0 || scan.damaged > 0) truncate_metrics_after(path.string(), step);
  return cut;
}

namespace {

// What a resume changes on purpose, as the stop's advice says (checkpoint.load, checkpoint.auto_resume, dropping
// checkpoint.overwrite), is how it continues, not the configuration its records came from; the '#' header
// changes with the spelling of the run folder's path. Neither counts as a change.
constexpr std::string_view kResumeKeys[] = {"load", "auto_resume", "overwrite"};

// config.yaml as emit_yaml writes it ("section:" lines, then "  key: value" lines), without what does not count.
std::string comparable_config(const std::string& yaml) {
  std::string out, section, line;
  std::istringstream in(yaml);
  while (std::getline(in, line)) {
    // (A line of spaces only, which an edit may leave, is blank too: no key to read.)
    if (line.find_first_not_of(' ') == std::string::npos || line[0] == '#') continue;
    if (line[0] != ' ') {
      section = line;
    } else if (section == "checkpoint:") {
      const size_t start = line.find_first_not_of(' ');
      const std::string_view key = std::string_view(line).substr(start, line.find(':') - start);
      if (std::find(std::begin(kResumeKeys), std::end(kResumeKeys), key) != std::end(kResumeKeys)) continue;
    }
    out += line + "\n";
  }
  return out;
}

}  // namespace

std::optional<std::string> keep_changed_config(const std::string& run_dir, const std::string& new_yaml) {
  const fs::path path = fs::path(run_dir) / kConfigYaml;
  std::error_code ec;
  if (!fs::exists(path, ec)) return std::nullopt;
  const std::string old_yaml = checkpoint::read_text_file(path.string());
  if (comparable_config(old_yaml) == comparable_config(new_yaml)) return std::nullopt;
  const fs::path archive = new_archive(run_dir, "the config.yaml its earlier steps ran with");
  keep_file(
      run_dir, archive, kConfigYaml,
      [&](const fs::path& to) { checkpoint::write_file_atomically(to.string(), old_yaml); }, "this run replaces it");
  return archive.string();
}

void log_records_cut(const RecordsCut& cut, const std::string& run_dir, int64_t step) {
  const std::string metrics = (fs::path(run_dir) / kMetricsJsonl).string();
  const auto s = static_cast<long long>(step);
  if (cut.records_after > 0) {
    log::info(strprintf("%s went on to step %lld, past the checkpoint's step %lld (a branch from an older "
                        "checkpoint, or steps run after the last save): moved its %zu record%s after step %lld, "
                        "with the config.yaml and report.html this run replaces, to %s; this run continues the "
                        "records up to step %lld",
                        metrics.c_str(), static_cast<long long>(cut.last_step), s, cut.records_after,
                        cut.records_after == 1 ? "" : "s", s, cut.kept_in ? cut.kept_in->c_str() : "(nowhere)", s));
  }
  if (cut.damaged_lines > 0) {
    const bool one = cut.damaged_lines == 1;
    log::info(strprintf("%s: dropped %s that %s no whole record (written only in part: the disk was full or the "
                        "run was killed while writing it)",
                        metrics.c_str(), one ? "a line" : strprintf("%zu lines", cut.damaged_lines).c_str(),
                        one ? "was" : "were"));
  }
  if (!cut.step_recorded) {
    log::warn(strprintf("%s has no record of step %lld, the checkpoint's step (its line was lost, e.g. at a full "
                        "disk); the checkpoint does not hold that step's loss, so the records go on from step %lld "
                        "without it",
                        metrics.c_str(), s, s + 1));
  }
}

}  // namespace sg::train
