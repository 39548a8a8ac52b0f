#include "reference/weight_decay_schedule.h"

#include <cmath>
#include <numbers>

namespace sg::ref {

float weight_decay_at(const WeightDecaySchedule& s, int64_t steps_done) {
  if (s.style == WeightDecaySchedule::Style::constant) return static_cast<float>(s.start);
  // n > incr_samples without forming n (steps_done * samples_per_step may not fit in int64 far past the end).
  if (steps_done > s.incr_samples / s.samples_per_step) return static_cast<float>(s.end);
  const double ratio = static_cast<double>(steps_done * s.samples_per_step) / static_cast<double>(s.incr_samples);
  const double coeff =
      s.style == WeightDecaySchedule::Style::linear ? ratio : 0.5 * (std::cos(std::numbers::pi * (1.0 - ratio)) + 1.0);
  return static_cast<float>(s.start + coeff * (s.end - s.start));
}

}  // namespace sg::ref
