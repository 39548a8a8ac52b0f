#include "reference/adamw.h"

#include <cmath>

#include "core/bf16_bits.h"

namespace sg::ref {

AdamWStepConstants adamw_step_constants(float lr, int64_t step, const AdamWConfig& config) {
  const double t = static_cast<double>(step);
  return {.step_size = static_cast<float>(lr / (1.0 - std::pow(static_cast<double>(config.beta1), t))),
          .bias_correction2_sqrt = static_cast<float>(std::sqrt(1.0 - std::pow(static_cast<double>(config.beta2), t))),
          .decay_factor = 1.0f - lr * config.weight_decay};
}

void adamw_step(float* params, const float* grads, float* exp_avg, float* exp_avg_sq, int64_t n, float lr,
                float grad_scale, int64_t step, const AdamWConfig& config, bool apply_weight_decay) {
  const AdamWStepConstants c = adamw_step_constants(lr, step, config);
  const float step_size = c.step_size, bc2_sqrt = c.bias_correction2_sqrt;
  const float decay_factor = apply_weight_decay ? c.decay_factor : 1.0f;
  for (int64_t i = 0; i < n; ++i) {
    const float g = grads[i] * grad_scale;
    const float m = config.beta1 * exp_avg[i] + (1.0f - config.beta1) * g;
    const float v = config.beta2 * exp_avg_sq[i] + (1.0f - config.beta2) * g * g;
    const float p = params[i] * decay_factor;
    params[i] = p - step_size * m / (std::sqrt(v) / bc2_sqrt + config.eps);
    exp_avg[i] = config.exp_avg_bf16 ? round_to_bf16(m) : m;
    exp_avg_sq[i] = config.exp_avg_sq_bf16 ? round_to_bf16(v) : v;
  }
}

}  // namespace sg::ref
