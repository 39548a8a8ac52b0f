#pragma once
// CPU fp32 twin of src/kernels/adamw: one AdamW step (PyTorch torch.optim.AdamW semantics, decoupled
// weight decay, bias correction).
#include <cstdint>

namespace sg::ref {

struct AdamWConfig {
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = 0.0f;  // this update's (weight_decay_at of reference/weight_decay_schedule.h)
  // Moments stored in bf16 (kernels::FloatDtype::bf16): each new moment is rounded to nearest even
  // after the weight update has used its fp32 value.
  bool exp_avg_bf16 = false;
  bool exp_avg_sq_bf16 = false;
};

// The update's step-dependent constants (t: the 1-based update; bias corrections in fp64, rounded to fp32):
//   step_size = lr / (1 - beta1^t);  bias_correction2_sqrt = sqrt(1 - beta2^t);
//   decay_factor = 1 - lr * weight_decay (fp32).
// The GPU computes them once per step (kernels/optimizer_step_scalars.h) and AdamW reads them.
struct AdamWStepConstants {
  float step_size = 0.0f;
  float bias_correction2_sqrt = 1.0f;
  float decay_factor = 1.0f;
};
AdamWStepConstants adamw_step_constants(float lr, int64_t step, const AdamWConfig& config);

// One step on n params, in place. step is the 1-based optimizer step t (this update is the t-th).
// Per element, in fp32 (bias corrections bc1 = 1 - beta1^t, bc2 = 1 - beta2^t computed in fp64):
//   g  = grads[i] * grad_scale                       (grad_scale = the clip coefficient, 1 = no clipping)
//   m  = beta1 * m + (1 - beta1) * g
//   v  = beta2 * v + (1 - beta2) * g * g
//   p  = p * (1 - lr * weight_decay)                 (only when apply_weight_decay)
//   p  = p - (lr / bc1) * m / (sqrt(v) / sqrt(bc2) + eps)
//   then m and v are stored, each rounded to bf16 where config asks for it.
void adamw_step(float* params, const float* grads, float* exp_avg, float* exp_avg_sq, int64_t n, float lr,
                float grad_scale, int64_t step, const AdamWConfig& config, bool apply_weight_decay);

}  // namespace sg::ref
