#pragma once
// Stopping a run whose numbers stopped being numbers. The step computes non-finite flags for the
// loss and the gradient norm on the device (inside the graph in every CUDA-graph mode) and the
// trainer reads them with the step's metrics, one step behind on the GPU; a flagged step ends the run
// within two steps, naming the step and the check, and exits with kExitNonFinite. Independently of
// the checks, a training state that holds a NaN/Inf is never saved.
#include <cstdint>
#include <string>

#include "config/config.h"
#include "core/error.h"
#include "model/stack.h"
#include "train/backend.h"

namespace sg::train {

// Exit status of `stepgraph train` stopped by a NaN/Inf (1: other errors, 2: usage, 128+N: signal).
inline constexpr int kExitNonFinite = 3;

class NonFiniteError : public sg::Error {
 public:
  explicit NonFiniteError(const std::string& message) : sg::Error(message) {}
  int exit_code() const { return kExitNonFinite; }
};

// Throws NonFiniteError when `result` is non-finite and the config checks for it
// (rerun_state_machine.check_for_nan_in_loss, ddp.check_for_nan_in_grad). `submitted` is the last
// step handed to the backend (the GPU reads results one step behind).
void check_step_finite(const StepResult& result, const config::Config& config, int64_t submitted);

// Throws NonFiniteError, naming the tensor, when the weights or Adam moments of `state` hold a
// NaN/Inf: such a checkpoint could only resume a broken run. `config` picks the advice: the NaN checks
// that are off, or the update when both are on.
void check_state_finite(const TrainingState& state, const model::ModelLayout& layout, const config::Config& config);

}  // namespace sg::train
