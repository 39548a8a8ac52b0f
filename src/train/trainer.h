#pragma once
// `stepgraph train`: config -> data -> backend -> steps, with progress, metrics, checkpoints, and a
// clean stop on SIGINT/SIGTERM (finish the step, save, exit).
#include <cmath>
#include <cstdint>
#include <string>

#include "config/config.h"

namespace sg::train {

struct TrainOptions {
  std::string run_dir;       // config.yaml, metrics.jsonl, report.html go here; default runs/<recipe name>
  bool force_cpu = false;    // use the CPU backend even when a GPU is present
  bool interactive = false;  // progress bar (stderr is a terminal)
  // When set, every step's batch is written there as batch_<step>.safetensors (tokens, targets,
  // loss_mask as [global_batch_size, seq_length]): to see what the model saw, or to replay it elsewhere.
  std::string dump_batches_dir;
};

struct TrainSummary {
  int64_t steps_done = 0;
  float first_loss = 0.0f;
  float last_loss = 0.0f;
  bool stopped_by_signal = false;
  double last_val_loss = NAN;  // NaN when no evaluation ran
  std::string metrics_path;
  std::string report_path;
};

// Validates (an invalid config never reaches the GPU), refuses features the engine does not have
// yet, then trains. Throws sg::Error for anything the user must fix; a NaN found by
// rerun_state_machine.check_for_nan_in_loss / ddp.check_for_nan_in_grad stops the run with an error
// naming the step and the check.
TrainSummary train(const config::Config& config, const TrainOptions& options);

}  // namespace sg::train
