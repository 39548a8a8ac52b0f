#pragma once
// Weight-decay schedule (Megatron's OptimizerParamScheduler.get_wd): the plan-time configuration. The decay is
// computed on the device from the device step counter by optimizer_step_scalars (kernels/optimizer_step_scalars.h),
// as the lr is, so a captured step replays with the right decay. CPU twin: reference/weight_decay_schedule.h
// (same formula, fp64).
#include <cstdint>

namespace sg::kernels {

// steps_done = optimizer steps done so far; Megatron counts samples, n = steps_done * samples_per_step. In fp64,
// rounded to fp32:
//   constant:                 start (validation keeps end = start)
//   n > incr_samples:         end
//   else r = n / incr_samples:  start + c * (end - start),  c = r (linear) or 0.5 * (cos(pi * (1 - r)) + 1) (cosine)
struct WeightDecayScheduleConfig {
  enum class Style { constant, linear, cosine };
  double start = 0.0;
  double end = 0.0;
  int64_t incr_samples = 0;      // Megatron's wd_incr_steps: train_iters x global batch, or train_samples
  int64_t samples_per_step = 1;  // the global batch
  Style style = Style::constant;
};

}  // namespace sg::kernels
