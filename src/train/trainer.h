#pragma once
// `stepgraph train`: config -> data -> backend -> steps, with progress, metrics, checkpoints, and a
// clean stop on SIGINT/SIGTERM (finish the step, save, exit).
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "config/config.h"
#include "core/error.h"

namespace sg::train {

class DistributedRun;

struct TrainOptions {
  std::string run_dir;       // config.yaml, metrics.jsonl, report.html go here; default runs/<recipe name>
  bool force_cpu = false;    // use the CPU backend even when a GPU is present
  bool interactive = false;  // progress bar (stderr is a terminal)
  // When set, every step's batch is written there as batch_<step>.safetensors (tokens, targets,
  // loss_mask as [global_batch_size, seq_length]): to see what the model saw, or to replay it elsewhere.
  std::string dump_batches_dir;
  // Data parallelism (train/distributed_run.h): this rank's run; nullptr for a single process. The
  // config's data_parallel_size must be its world size. Every rank trains its slice of each global batch
  // (data/rank_batch.h); only rank 0 writes checkpoints; all stop after the same step.
  DistributedRun* distributed = nullptr;
  // Called after each checkpoint save with its step (tools and tests observe saves; a stop
  // requested here ends the run right after this save).
  std::function<void(int64_t step)> on_saved;
  // checkpoint.most_recent_k's test hook (checkpoint::RetentionHooks::on_stage): runs before each step of an old
  // folder's removal ("rename", "remove") with its path; one that throws makes that removal fail.
  std::function<void(const std::string& stage, const std::string& path)> on_checkpoint_removal;
};

struct TrainSummary {
  int64_t start_step = 0;   // the resumed checkpoint's step (0 for a fresh run)
  int64_t steps_done = 0;   // the last finished step
  int64_t train_iters = 0;  // train.train_iters: a run whose steps_done is short of it was stopped
  int64_t steps_run() const { return steps_done - start_step; }
  float first_loss = 0.0f;
  float last_loss = 0.0f;
  bool stopped_by_signal = false;
  int stop_signal = 0;  // that signal, received by this rank or (data parallel) another one: exit 128 + it
  double last_val_loss = NAN;  // NaN when no evaluation ran; the first set's with multiple_validation_sets
  // With validation.multiple_validation_sets: each set's last validation loss, by name, in order.
  std::vector<std::pair<std::string, double>> val_set_losses;
  double test_loss = NAN;      // the test split's, after the last step (NaN when none ran)
  std::string metrics_path;    // empty when nothing ran
  std::string evaluation_path;  // validation.skip_train: the evaluation's result file (rank 0)
  std::string report_path;
  // What the run's last line adds (train/run_end.h): after a stop, what was saved and how to go on; for a
  // finished run without checkpoint.save, that its weights were not saved and how to keep them. Else empty.
  std::string end_note;
};

// An error the trainer has already printed: once steps run, it reports a failure before it releases
// the device, so a crash or hang in the release cannot swallow the message. The CLI only maps it to
// its exit status.
class ReportedError : public sg::Error {
 public:
  ReportedError(const std::string& message, int exit_code) : sg::Error(message), exit_code_(exit_code) {}
  int exit_code() const { return exit_code_; }

 private:
  int exit_code_;
};

// Validates (an invalid config never reaches the GPU), refuses features the engine does not have
// yet, checks everything that can be checked before a step (data, checkpoint directories and their
// lock, the checkpoint to resume, host memory), then trains. Throws sg::Error for anything the user
// must fix before training; once steps run, a failure is printed at once and thrown as
// ReportedError. A NaN found by rerun_state_machine.check_for_nan_in_loss /
// ddp.check_for_nan_in_grad stops the run within two steps naming the step and the check (exit
// status kExitNonFinite, train/nonfinite_stop.h), and a non-finite state is never saved.
TrainSummary train(const config::Config& config, const TrainOptions& options);

}  // namespace sg::train
