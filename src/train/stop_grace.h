#pragma once
// How long the stop watchdog (graph/registry.h) waits after SIGINT/SIGTERM/SIGHUP before it ends the
// process: long enough for the step in flight and, when the run saves checkpoints, one whole save.
// A fixed grace would cut the final save of a large model short (losing exactly the checkpoint the
// signal asked for), so it scales with the measured step and save times, and before the first save
// with the checkpoint's size at a pessimistic write speed.
#include <cstdint>

namespace sg::train {

struct StopGraceInputs {
  bool saves = false;             // checkpoint.save is set
  double checkpoint_bytes = 0.0;  // bytes one save writes
  double step_seconds = 0.0;      // the slowest step so far
  double save_seconds = -1.0;     // the slowest save so far; < 0 before the first one
};

// Pessimistic write speed for the first save's estimate (a busy network filesystem).
inline constexpr double kSlowWriteBytesPerSecond = 50e6;

double stop_grace_seconds(const StopGraceInputs& in);

}  // namespace sg::train
