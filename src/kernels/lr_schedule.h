#pragma once
// Learning-rate schedule on the device: the lr is computed from the device step counter, so a
// captured step replays with the right lr. CPU twin: reference/lr_schedule.h (same formula, fp64).
#include <cuda_runtime.h>

#include <cstdint>

namespace sg::kernels {

struct LrScheduleConfig {
  enum class Style { constant, linear, cosine };
  float lr = 0.0f;      // peak lr
  float min_lr = 0.0f;  // reached at decay_iters (linear, cosine)
  int64_t warmup_iters = 0;
  int64_t decay_iters = 0;  // absolute step where the decay ends (warmup included)
  Style style = Style::constant;
};

// step = *step_counter (optimizer steps done so far); in fp64, rounded to fp32:
//   step < warmup_iters:                 lr * (step + 1) / warmup_iters
//   constant:                            lr
//   linear/cosine, step >= decay_iters:  min_lr
//   else p = (step - warmup_iters) / (decay_iters - warmup_iters):
//     linear: min_lr + (lr - min_lr)(1 - p);  cosine: min_lr + (lr - min_lr) 0.5 (1 + cos(pi p))
struct LrScheduleParams {
  LrScheduleConfig schedule;  // plan-time constants
  const int64_t* step_counter = nullptr;  // device scalar
  float* lr = nullptr;                    // device scalar OUT
};
void lr_schedule_update(cudaStream_t stream, const LrScheduleParams& p);

// *step_counter += 1 (the last launch of a training step, after adamw_step).
void increment_step_counter(cudaStream_t stream, int64_t* step_counter);

}  // namespace sg::kernels
