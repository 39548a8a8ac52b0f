#pragma once
// CPU twin of src/kernels/optimizer_step_scalars: the optimizer's per-step scalars from the gradient
// norm's partial sums, the step loss and the steps done (the formulas of reference/grad_norm.h,
// reference/lr_schedule.h, reference/weight_decay_schedule.h and reference/adamw.h).
#include <cstdint>

#include "reference/adamw.h"
#include "reference/lr_schedule.h"
#include "reference/weight_decay_schedule.h"

namespace sg::ref {

// The kernel's summation order of the partial sums of squares (n a multiple of 32): each group of 32
// as a pairwise tree ((p0 + p1) + (p2 + p3)) + ..., then the groups' sums one after the other.
double sum_norm_partials(const double* partials, int64_t n);

struct OptimizerStepScalars {
  float grad_norm = 0.0f;         // sqrt(sum_norm_partials), rounded to fp32
  float clip_coefficient = 1.0f;  // clip_coefficient(grad_norm, max_norm)
  bool grad_nonfinite = false;    // the norm is NaN/inf
  bool loss_nonfinite = false;    // the loss is NaN/inf
  float lr = 0.0f;                // lr_at(schedule, steps_done)
  float weight_decay = 0.0f;      // weight_decay_at(weight_decay_schedule, steps_done)
  AdamWStepConstants adamw;       // adamw_step_constants(lr, steps_done + 1, config with that weight_decay)
};

// config's betas (its weight_decay is the schedule's at steps_done).
OptimizerStepScalars optimizer_step_scalars(const double* partials, int64_t n, float max_norm, float loss,
                                            const LrSchedule& schedule,
                                            const WeightDecaySchedule& weight_decay_schedule, int64_t steps_done,
                                            AdamWConfig config);

}  // namespace sg::ref
