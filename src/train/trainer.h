#pragma once
// `stepgraph train`: config -> data -> backend -> steps, with progress, metrics, checkpoints, and a
// clean stop on SIGINT/SIGTERM (finish the step, save, exit).
#include <cstdint>
#include <string>

#include "config/config.h"

namespace sg::train {

class DistributedRun;

struct TrainOptions {
  std::string run_dir;       // metrics.jsonl goes here; default runs/<recipe name>
  bool force_cpu = false;    // use the CPU backend even when a GPU is present
  bool interactive = false;  // progress bar (stderr is a terminal)
  // When set, every step's batch is written there as batch_<step>.safetensors (tokens, targets,
  // loss_mask as [global_batch_size, seq_length]): to see what the model saw, or to replay it elsewhere.
  std::string dump_batches_dir;
  // Data parallelism (train/distributed_run.h): this rank's run; nullptr for a single process. The
  // config's data_parallel_size must be its world size. Every rank trains its slice of each global batch
  // (data/rank_batch.h); only rank 0 writes checkpoints; all stop after the same step.
  DistributedRun* distributed = nullptr;
};

struct TrainSummary {
  int64_t steps_done = 0;
  float first_loss = 0.0f;
  float last_loss = 0.0f;
  bool stopped_by_signal = false;
  std::string metrics_path;
};

// Validates (an invalid config never reaches the GPU), refuses features the engine does not have
// yet, then trains. Throws sg::Error for anything the user must fix; a NaN found by
// rerun_state_machine.check_for_nan_in_loss / ddp.check_for_nan_in_grad stops the run with an error
// naming the step and the check.
TrainSummary train(const config::Config& config, const TrainOptions& options);

}  // namespace sg::train
