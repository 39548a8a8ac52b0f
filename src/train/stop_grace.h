#pragma once
// How long the stop watchdog (graph/registry.h) waits after SIGINT/SIGTERM/SIGHUP before it ends the
// process: long enough for the step in flight, an evaluation in flight and, when the run saves
// checkpoints, one whole save. A fixed grace would cut the final save of a large model short (losing
// exactly the checkpoint the signal asked for), so it scales with the measured step, evaluation and
// save times; before the first step is measured a step is assumed to take kUnmeasuredStepSeconds
// (the first step also warms up, or captures CUDA graphs), before the first evaluation each of its
// batches a step, and before the first save the checkpoint's size is written at a pessimistic speed.
// A hung run still ends, after this grace.
#include <cstdint>

namespace sg::train {

struct StopGraceInputs {
  bool saves = false;             // checkpoint.save is set
  double checkpoint_bytes = 0.0;  // bytes one save writes
  double step_seconds = -1.0;     // the slowest step so far; < 0 before the first one is measured
  double save_seconds = -1.0;     // the slowest save so far; < 0 before the first one
  int64_t eval_batches = 0;       // step-shaped batches one evaluation runs (EvalBatching); 0: no evaluation
  double eval_seconds = -1.0;     // the slowest evaluation so far; < 0 before the first one
};

// Pessimistic write speed for the first save's estimate (a busy network filesystem).
inline constexpr double kSlowWriteBytesPerSecond = 50e6;
// What a step not yet measured may take (the first step of a run).
inline constexpr double kUnmeasuredStepSeconds = 60.0;

double stop_grace_seconds(const StopGraceInputs& in);

}  // namespace sg::train
