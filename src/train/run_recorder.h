#pragma once
// What a training run leaves in runs/<name>/ (besides checkpoints):
//   config.yaml    the resolved configuration (validated, defaults filled in): `stepgraph train
//                  runs/<name>/config.yaml` runs it again
//   metrics.jsonl  one JSON line per step (loss, grad norm, lr, step ms, tokens/s, TFLOP/s, MFU, memory,
//                  wall_time_s, tokens; "capture": true on the step that captured the CUDA graphs) and
//                  one per evaluation (step, val_loss, val_ppl, eval_batches, eval_ms, wall_time_s, tokens; and
//                  val_set, a set's name, with validation.multiple_validation_sets: one record a set)
//   report.html    the run as charts (train/run_report.h), at the end — also after Ctrl-C or an error
//   run.json       the run's id; previous/run-<k>/: an earlier run's files (train/run_folder.h)
// and, with logger.tensorboard_dir, TensorBoard event files with the same numbers under Megatron's tags:
// "lm loss", "lm loss validation", "lm loss validation ppl", "learning-rate", "grad-norm",
// "iteration-time" (ms), "tokens-per-second", "throughput" (TFLOP/s), "mem-allocated-bytes".
#include <memory>
#include <string>
#include <vector>

#include "config/config.h"
#include "train/metrics.h"
#include "train/run_report.h"
#include "train/tensorboard_writer.h"

namespace sg::train {

// config.yaml's last header line for a run with checkpoint.save: how to rerun it from its checkpoints and how
// to start it over (config/checkpoint_overrides.h).
std::string start_over_hint(const config::CheckpointConfig& checkpoint);

// How a run meets its folder, as start_run_folder() and cut_records_after() (train/run_folder.h) prepared it.
struct RecorderStart {
  bool resumed = false;      // the folder's records are this run's (RunFolderStart::continues): append to them
  bool config_kept = false;  // cut_records_after kept the folder's config.yaml already (RecordsCut::kept_in)
  int64_t start_step = 0;    // the step the run continues from: its checkpoint's iteration (0: a fresh run)
};

class RunRecorder {
 public:
  // Writes config.yaml and run.json and opens metrics.jsonl (appended when resumed) and the TensorBoard file (its
  // session starting at start.start_step + 1).
  // A resumed run whose configuration changed keeps the folder's config.yaml first (keep_changed_config, unless
  // `start.config_kept`), and logs where.
  RunRecorder(const config::Config& config, const std::string& run_dir, const RecorderStart& start,
              const std::string& run_id, RunReportInfo report);
  ~RunRecorder();  // writes the report if finish() did not (never throws)
  RunRecorder(const RunRecorder&) = delete;
  RunRecorder& operator=(const RunRecorder&) = delete;

  void step(const StepMetrics& m);
  void eval(const EvalMetrics& m);
  // Writes report.html with `status` ("finished: 300 steps", "stopped by SIGINT after step 120").
  void finish(const std::string& status);

  const std::string& metrics_path() const { return metrics_path_; }
  std::string report_path() const;
  std::string tensorboard_path() const { return tensorboard_ ? tensorboard_->path() : std::string(); }

 private:
  std::string run_dir_;
  std::string metrics_path_;
  std::unique_ptr<MetricsLog> metrics_;
  std::unique_ptr<TensorBoardWriter> tensorboard_;
  RunReportInfo report_;
  bool finished_ = false;
  int64_t last_step_ = 0;
};

}  // namespace sg::train
