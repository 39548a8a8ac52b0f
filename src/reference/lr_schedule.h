#pragma once
// CPU twin of src/kernels/lr_schedule: learning rate as a function of the optimizer step (Megatron's
// OptimizerParamScheduler, with a 1-based warmup so the first update has lr > 0 when it starts from 0).
#include <cstdint>

namespace sg::ref {

struct LrSchedule {
  enum class Style { constant, linear, cosine, inverse_square_root, wsd };
  enum class WsdDecay { exponential, linear, cosine, minus_sqrt };
  float lr = 0.0f;           // peak lr (after warmup)
  float min_lr = 0.0f;       // floor reached at decay_iters (every style but constant)
  float warmup_init = 0.0f;  // the lr the warmup rises from
  int64_t warmup_iters = 0;
  int64_t decay_iters = 0;       // absolute step where the decay ends (counts the warmup too)
  int64_t wsd_decay_iters = 0;   // wsd: the annealing steps that end at decay_iters (> 0)
  int64_t samples_per_step = 1;  // the global batch: inverse_square_root counts samples, as Megatron does
  Style style = Style::constant;
  WsdDecay wsd_decay = WsdDecay::exponential;
};

// step = optimizer steps done so far (0-based: the lr used by the (step+1)-th update). In fp64, then
// rounded to fp32:
//   step < warmup_iters:                   warmup_init + (lr - warmup_init) * (step + 1) / warmup_iters
//   constant (after warmup):               lr                        (min_lr and decay_iters unused)
//   every other style, step >= decay_iters: min_lr
//   inverse_square_root:                   max(min_lr, lr * sqrt(max(warmup_iters * g, 1)) / sqrt(max(step * g, 1))),
//                                          g = samples_per_step
//   otherwise min_lr + (lr - min_lr) * c,  p = (step - warmup_iters) / (decay_iters - warmup_iters) in [0,1)
//       linear: c = 1 - p
//       cosine: c = 0.5 * (1 + cos(pi * p))
//       wsd:    c = 1 while step <= decay_iters - wsd_decay_iters, then q = (step - that) / wsd_decay_iters and
//               exponential 2 * 0.5^q - 1, linear 1 - q, cosine 0.5 * (1 + cos(pi * q)), minus_sqrt 1 - sqrt(q)
float lr_at(const LrSchedule& schedule, int64_t step);

}  // namespace sg::ref
