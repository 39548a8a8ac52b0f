#pragma once
// Learning-rate schedule: the plan-time configuration. The lr is computed on the device from the device
// step counter by optimizer_step_scalars (kernels/optimizer_step_scalars.h), so a captured step replays
// with the right lr. CPU twin: reference/lr_schedule.h (same formula, fp64).
#include <cstdint>

namespace sg::kernels {

// step = optimizer steps done so far; in fp64, rounded to fp32 (Megatron's OptimizerParamScheduler.get_lr, with the
// warmup one step earlier so that the first update has lr > 0 when warmup_init is 0):
//   step < warmup_iters:           warmup_init + (lr - warmup_init) * (step + 1) / warmup_iters
//   constant:                      lr
//   step >= decay_iters:           min_lr
//   inverse_square_root:           max(min_lr, lr * sqrt(max(warmup_iters * g, 1)) / sqrt(max(step * g, 1)))
//                                  with g = samples_per_step (Megatron counts samples: no warmup means one sample)
//   else min_lr + (lr - min_lr) * c, with p = (step - warmup_iters) / (decay_iters - warmup_iters):
//     linear: c = 1 - p;  cosine: c = 0.5 (1 + cos(pi p))
//     wsd: c = 1 until step <= decay_iters - wsd_decay_iters, then with q = (step - that) / wsd_decay_iters:
//       exponential: 2 * 0.5^q - 1;  linear: 1 - q;  cosine: 0.5 (1 + cos(pi q));  minus_sqrt: 1 - sqrt(q)
struct LrScheduleConfig {
  enum class Style { constant, linear, cosine, inverse_square_root, wsd };
  enum class WsdDecay { exponential, linear, cosine, minus_sqrt };
  float lr = 0.0f;           // peak lr
  float min_lr = 0.0f;       // reached at decay_iters (every style but constant)
  float warmup_init = 0.0f;  // the lr the warmup rises from
  int64_t warmup_iters = 0;
  int64_t decay_iters = 0;       // absolute step where the decay ends (warmup included)
  int64_t wsd_decay_iters = 0;   // wsd: the annealing steps that end at decay_iters (> 0)
  int64_t samples_per_step = 1;  // the global batch (inverse_square_root)
  Style style = Style::constant;
  WsdDecay wsd_decay = WsdDecay::exponential;
};

}  // namespace sg::kernels
