#pragma once
// CPU twin of src/kernels/weight_decay_schedule: AdamW's weight decay as a function of the optimizer step
// (Megatron's OptimizerParamScheduler.get_wd).
#include <cstdint>

namespace sg::ref {

struct WeightDecaySchedule {
  enum class Style { constant, linear, cosine };
  double start = 0.0;            // the decay of the first update (of every update, constant)
  double end = 0.0;              // reached after incr_samples samples (linear, cosine)
  int64_t incr_samples = 0;      // Megatron's wd_incr_steps (> 0 unless constant)
  int64_t samples_per_step = 1;  // the global batch (> 0)
  Style style = Style::constant;
};

// steps_done = optimizer steps done so far (the decay of update steps_done + 1, as lr_at's step). Megatron's
// num_steps counts samples: n = steps_done * samples_per_step. In fp64, then rounded to fp32:
//   constant:                  start
//   n > incr_samples:          end
//   otherwise r = n / incr_samples in [0, 1]:
//       linear: start + r * (end - start)
//       cosine: start + 0.5 * (cos(pi * (1 - r)) + 1) * (end - start)
float weight_decay_at(const WeightDecaySchedule& schedule, int64_t steps_done);

}  // namespace sg::ref
