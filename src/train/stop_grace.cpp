#include "train/stop_grace.h"

#include <algorithm>

namespace sg::train {

double stop_grace_seconds(const StopGraceInputs& in) {
  const double step = std::max(in.step_seconds, 0.0);
  if (!in.saves) return std::max(1.5, 1.5 + 2.0 * step);
  const double save = in.save_seconds >= 0.0 ? in.save_seconds : in.checkpoint_bytes / kSlowWriteBytesPerSecond;
  // The step in flight, then a save that may be slower than the last one (a busier disk): x3.
  return std::max(120.0, 2.0 * step + 3.0 * save + 10.0);
}

}  // namespace sg::train
