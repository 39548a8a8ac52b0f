#include "train/stop_grace.h"

#include <algorithm>

namespace sg::train {

double stop_grace_seconds(const StopGraceInputs& in) {
  const double step = in.step_seconds >= 0.0 ? in.step_seconds : kUnmeasuredStepSeconds;
  // A signal during an evaluation waits for it (data parallel: one rank alone cannot end it early).
  // None runs before the first step is measured: a stop during that step skips it.
  double eval = 0.0;
  if (in.eval_batches > 0 && in.step_seconds >= 0.0) {
    // A batch's forward is about a third of a step: one step per batch is a generous estimate.
    eval = 1.5 * (in.eval_seconds >= 0.0 ? in.eval_seconds : static_cast<double>(in.eval_batches) * step);
  }
  if (!in.saves) return 1.5 + 2.0 * step + eval;
  const double save = in.save_seconds >= 0.0 ? in.save_seconds : in.checkpoint_bytes / kSlowWriteBytesPerSecond;
  // The step in flight, then a save that may be slower than the last one (a busier disk): x3.
  return std::max(120.0, 2.0 * step + eval + 3.0 * save + 10.0);
}

}  // namespace sg::train
