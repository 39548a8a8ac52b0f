#pragma once
// A run folder (runs/<name>/ or --run-dir: config.yaml, metrics.jsonl, report.html, run.json) holds the
// records of one run, and none is ever replaced by another run's. run.json names the run: a run id made
// when the run starts fresh and kept in every checkpoint it saves (train_state.json), so a resumed run
// keeps it. Running the same recipe again writes to the same folder; when a run starts
//   * fresh, in a folder that holds records: the earlier run's files move to previous/run-<k>/ (k: the
//     first number not taken) before the new run writes its own;
//   * resumed from a checkpoint of the run that wrote the folder: the folder continues (cut_records_after cuts
//     metrics.jsonl back to the checkpoint's step; the records of later steps it cuts, a branch from an older
//     checkpoint or steps run after the last save, go to previous/run-<k>/metrics.jsonl first, with copies of the
//     config.yaml and report.html the resumed run replaces; no run.json there: they are not a whole run's
//     records, so no resume brings them back); when none are cut but the configuration changed, the folder's
//     config.yaml goes to a previous/run-<k>/ of its own (keep_changed_config) before the resumed run's replaces it;
//   * resumed from a checkpoint of another run (the ids differ): the folder's files move aside as for a
//     fresh run, and the checkpoint's run's own files come back from previous/ when they are there (then
//     they continue as above); else its records start a new metrics.jsonl.
// A checkpoint from before run ids (no id in train_state.json), or a folder whose records predate them (no
// run.json), continues. The top level is always the latest run; nothing is deleted.
#include <cstdint>
#include <optional>
#include <string>

namespace sg::train {

// The files a run leaves in its folder, which move together.
inline constexpr const char* kConfigYaml = "config.yaml";      // the resolved configuration
inline constexpr const char* kMetricsJsonl = "metrics.jsonl";  // one line a step
inline constexpr const char* kReportHtml = "report.html";
inline constexpr const char* kRunJson = "run.json";            // the run id
inline constexpr const char* kRunFolderFiles[] = {kConfigYaml, kMetricsJsonl, kReportHtml, kRunJson};

// "20261202T073501Z-4685-9f3c0a1b": the start time (UTC), the process id and 32 random bits.
std::string new_run_id();
// run.json's run id; nullopt when the folder has none (or an unreadable one: treated as unnamed).
std::optional<std::string> read_run_id(const std::string& run_dir);
// Writes run.json (atomically); sg::Error naming the file on failure.
void write_run_id(const std::string& run_dir, const std::string& run_id);

// Moves an earlier run's files aside; returns the folder they went to, or nullopt when `run_dir` holds no
// records (no metrics.jsonl, or an empty one: a run that ended before its first step). sg::Error naming the
// file and the fix when a file cannot be moved.
std::optional<std::string> keep_earlier_run(const std::string& run_dir);

// The run folder whose config.yaml `yaml_path` is (a run.json beside it), else nullopt: `stepgraph train
// runs/x/config.yaml` runs again in runs/x (not runs/config), and so does runs/x/previous/run-<k>/config.yaml.
std::optional<std::string> run_folder_of_config(const std::string& yaml_path);

// What a resumed run that continues the folder (RunFolderStart::continues) found in metrics.jsonl past the
// checkpoint's step, and did about it, before it appends its own records.
struct RecordsCut {
  size_t records_after = 0;            // whole records of later steps (a run that went further): cut
  int64_t last_step = -1;              // the last step those reach
  size_t damaged_lines = 0;            // lines that are no record (cut short by a crash or a full disk): dropped
  bool step_recorded = true;           // a training record of the checkpoint's step itself is there
  std::optional<std::string> kept_in;  // previous/run-<k>/: the cut lines, config.yaml and report.html as they were
};
// Cuts metrics.jsonl back to `step`. When that cuts whole records of later steps, the cut lines and copies of
// config.yaml and report.html go to a new previous/run-<k>/ first (durably), so none of them is lost. The cut lines
// past 4 MiB stream through a temporary beside metrics.jsonl (metrics.jsonl.cut-<pid>, renamed into the archive):
// a branch from an old checkpoint of a long run cuts most of its records. sg::Error naming the file and the fix when
// that or the rewrite fails (then nothing was cut).
RecordsCut cut_records_after(const std::string& run_dir, int64_t step);
// Logs what cut_records_after did (nothing when there was nothing to do), and warns when the checkpoint's own
// step has no record (the run cannot write it again: its numbers are not in the checkpoint).
void log_records_cut(const RecordsCut& cut, const std::string& run_dir, int64_t step);

// A resumed run that continues the folder (and cut no records, which keeps config.yaml with them): when the
// folder's config.yaml differs from `new_yaml`, the one the run writes, it goes to a new previous/run-<k>/ first
// (durably; no run.json), so the earlier steps' records keep the configuration they ran with. The '#' header and
// the keys a resume sets (checkpoint.load, auto_resume, overwrite) do not count. Returns that folder, or nullopt
// when the folder has no config.yaml or the same one. sg::Error naming the file and the fix when it cannot be kept.
std::optional<std::string> keep_changed_config(const std::string& run_dir, const std::string& new_yaml);

struct RunFolderStart {
  bool continues = false;                    // append to the folder's records: they are the resumed run's
  std::optional<std::string> archived_to;    // where an earlier (or another) run's files went
  std::optional<std::string> restored_from;  // where the resumed run's own files came back from
};
// Applies the rules above. `checkpoint_run_id`: nullopt for a fresh run, else the resumed checkpoint's run id
// ("" for a checkpoint from before run ids).
RunFolderStart start_run_folder(const std::string& run_dir, const std::optional<std::string>& checkpoint_run_id);

}  // namespace sg::train
