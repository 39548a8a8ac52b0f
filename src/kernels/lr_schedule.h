#pragma once
// Learning-rate schedule: the plan-time configuration. The lr is computed on the device from the device
// step counter by optimizer_step_scalars (kernels/optimizer_step_scalars.h), so a captured step replays
// with the right lr. CPU twin: reference/lr_schedule.h (same formula, fp64).
#include <cstdint>

namespace sg::kernels {

// step = optimizer steps done so far; in fp64, rounded to fp32:
//   step < warmup_iters:                 lr * (step + 1) / warmup_iters
//   constant:                            lr
//   linear/cosine, step >= decay_iters:  min_lr
//   else p = (step - warmup_iters) / (decay_iters - warmup_iters):
//     linear: min_lr + (lr - min_lr)(1 - p);  cosine: min_lr + (lr - min_lr) 0.5 (1 + cos(pi p))
struct LrScheduleConfig {
  enum class Style { constant, linear, cosine };
  float lr = 0.0f;      // peak lr
  float min_lr = 0.0f;  // reached at decay_iters (linear, cosine)
  int64_t warmup_iters = 0;
  int64_t decay_iters = 0;  // absolute step where the decay ends (warmup included)
  Style style = Style::constant;
};

}  // namespace sg::kernels
