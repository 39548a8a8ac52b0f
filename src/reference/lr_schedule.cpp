#include "reference/lr_schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace sg::ref {

namespace {

// WSD's annealing coefficient at q in (0, 1] of the annealing phase (Megatron's lr_wsd_decay_style).
double wsd_coefficient(LrSchedule::WsdDecay decay, double q) {
  switch (decay) {
    case LrSchedule::WsdDecay::exponential: return 2.0 * std::pow(0.5, q) - 1.0;
    case LrSchedule::WsdDecay::linear: return 1.0 - q;
    case LrSchedule::WsdDecay::cosine: return 0.5 * (1.0 + std::cos(std::numbers::pi * q));
    case LrSchedule::WsdDecay::minus_sqrt: return 1.0 - std::sqrt(q);
  }
  return 1.0;
}

}  // namespace

float lr_at(const LrSchedule& s, int64_t step) {
  using Style = LrSchedule::Style;
  const double lr = s.lr, min_lr = s.min_lr;
  if (step < s.warmup_iters) {
    const double init = s.warmup_init;
    return static_cast<float>(init + (lr - init) * static_cast<double>(step + 1) / static_cast<double>(s.warmup_iters));
  }
  if (s.style == Style::constant) return s.lr;
  if (step >= s.decay_iters) return s.min_lr;
  if (s.style == Style::inverse_square_root) {
    // Megatron counts samples: sqrt(warmup samples / samples done), each at least one sample.
    const double g = static_cast<double>(s.samples_per_step);
    const double warmup = std::max(static_cast<double>(s.warmup_iters) * g, 1.0);
    const double done = std::max(static_cast<double>(step) * g, 1.0);
    return static_cast<float>(std::max(min_lr, lr * std::sqrt(warmup) / std::sqrt(done)));
  }
  if (s.style == Style::wsd) {
    // Stable at lr until the annealing phase, the last wsd_decay_iters steps before decay_iters.
    const int64_t anneal_start = s.decay_iters - s.wsd_decay_iters;
    const double coeff = step <= anneal_start
                             ? 1.0
                             : wsd_coefficient(s.wsd_decay, static_cast<double>(step - anneal_start) /
                                                                static_cast<double>(s.wsd_decay_iters));
    return static_cast<float>(min_lr + (lr - min_lr) * coeff);
  }
  // Here warmup_iters <= step < decay_iters, so the span is positive.
  const double progress = static_cast<double>(step - s.warmup_iters) /
                          static_cast<double>(s.decay_iters - s.warmup_iters);
  if (s.style == Style::linear) return static_cast<float>(min_lr + (lr - min_lr) * (1.0 - progress));
  return static_cast<float>(min_lr + (lr - min_lr) * 0.5 * (1.0 + std::cos(std::numbers::pi * progress)));
}

}  // namespace sg::ref
