#pragma once
// CPU twin of src/kernels/lr_schedule: learning rate as a function of the optimizer step (Megatron's
// OptimizerParamScheduler with init_lr = 0 and a 1-based warmup so the first update has lr > 0).
#include <cstdint>

namespace sg::ref {

struct LrSchedule {
  enum class Style { constant, linear, cosine };
  float lr = 0.0f;      // peak lr (after warmup)
  float min_lr = 0.0f;  // floor reached at decay_iters (linear, cosine)
  int64_t warmup_iters = 0;
  int64_t decay_iters = 0;  // absolute step where the decay ends (counts the warmup too)
  Style style = Style::constant;
};

// step = optimizer steps done so far (0-based: the lr used by the (step+1)-th update). In fp64, then
// rounded to fp32:
//   step < warmup_iters:                   lr * (step + 1) / warmup_iters
//   constant (after warmup):               lr                        (min_lr and decay_iters unused)
//   linear/cosine, step >= decay_iters:    min_lr
//   linear/cosine, otherwise:              p = (step - warmup_iters) / (decay_iters - warmup_iters) in [0,1)
//       linear: min_lr + (lr - min_lr) * (1 - p)
//       cosine: min_lr + (lr - min_lr) * 0.5 * (1 + cos(pi * p))
float lr_at(const LrSchedule& schedule, int64_t step);

}  // namespace sg::ref
