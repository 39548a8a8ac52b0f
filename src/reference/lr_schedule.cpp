#include "reference/lr_schedule.h"

#include <cmath>
#include <numbers>

namespace sg::ref {

float lr_at(const LrSchedule& s, int64_t step) {
  const double lr = s.lr, min_lr = s.min_lr;
  if (step < s.warmup_iters) {
    return static_cast<float>(lr * static_cast<double>(step + 1) / static_cast<double>(s.warmup_iters));
  }
  if (s.style == LrSchedule::Style::constant) return s.lr;
  if (step >= s.decay_iters) return s.min_lr;
  // Here warmup_iters <= step < decay_iters, so the span is positive.
  const double progress = static_cast<double>(step - s.warmup_iters) /
                          static_cast<double>(s.decay_iters - s.warmup_iters);
  if (s.style == LrSchedule::Style::linear) return static_cast<float>(min_lr + (lr - min_lr) * (1.0 - progress));
  return static_cast<float>(min_lr + (lr - min_lr) * 0.5 * (1.0 + std::cos(std::numbers::pi * progress)));
}

}  // namespace sg::ref
