#include "reference/optimizer_step_scalars.h"

#include <cmath>

#include "reference/grad_norm.h"

namespace sg::ref {

namespace {

double pairwise_sum(const double* v, int64_t n) {
  if (n == 1) return v[0];
  return pairwise_sum(v, n / 2) + pairwise_sum(v + n / 2, n / 2);
}

}  // namespace

double sum_norm_partials(const double* partials, int64_t n) {
  double total = 0.0;
  for (int64_t group = 0; group < n / 32; ++group) {
    const double s = pairwise_sum(partials + group * 32, 32);
    total = group == 0 ? s : total + s;
  }
  return total;
}

OptimizerStepScalars optimizer_step_scalars(const double* partials, int64_t n, float max_norm, float loss,
                                            const LrSchedule& schedule,
                                            const WeightDecaySchedule& weight_decay_schedule, int64_t steps_done,
                                            AdamWConfig config) {
  OptimizerStepScalars out;
  const double norm = std::sqrt(sum_norm_partials(partials, n));
  out.grad_norm = static_cast<float>(norm);
  out.clip_coefficient = clip_coefficient(norm, max_norm);
  out.grad_nonfinite = !std::isfinite(out.grad_norm);
  out.loss_nonfinite = !std::isfinite(loss);
  out.lr = lr_at(schedule, steps_done);
  out.weight_decay = weight_decay_at(weight_decay_schedule, steps_done);
  config.weight_decay = out.weight_decay;
  out.adamw = adamw_step_constants(out.lr, steps_done + 1, config);
  return out;
}

}  // namespace sg::ref
