#pragma once
// The optimizer's per-step scalars in ONE single-block launch at the end of a training step, between the
// gradient norm's partial sums (kernels/grad_norm.h, then the data-parallel sum over ranks) and AdamW:
//   1. grad norm = sqrt of the kGradNormPartials partial sums added in a fixed order (every warp a pairwise
//      tree over its 32 partials, then warp 0's .. warp 31's sums one after the other, the order of
//      cub::BlockReduce<double, 1024>), rounded to fp32; clip coefficient as ref::clip_coefficient; the
//      sticky grad non-finite flag (ddp.check_for_nan_in_grad);
//   2. the sticky loss non-finite flag (rerun_state_machine.check_for_nan_in_loss) for the step loss;
//   3. lr and weight decay = their schedules at step = *step_counter (steps done so far), fp64 rounded to fp32;
//   4. AdamW's constants for update t = steps done + 1 (kernels/adamw.h AdamWStepConstants), its decay factor
//      from that weight decay;
//   5. *step_counter += 1;
//   6. the RNG trackers' advance after the step's last microbatch (cuda/rng_tracker.h): offset += by for each
//      state, folded in here because nothing between the last microbatch and this launch draws numbers.
// Everything is read from and written to device memory, so a captured step replays correctly.
// CPU twin: reference/optimizer_step_scalars.h (the same formulas and summation order).
#include <cuda_runtime.h>

#include <cstdint>

#include "core/philox.h"
#include "kernels/adamw.h"
#include "kernels/grad_norm.h"
#include "kernels/lr_schedule.h"
#include "kernels/weight_decay_schedule.h"

namespace sg::kernels {

struct OptimizerStepScalarsParams {
  // Gradient norm and clipping.
  const double* norm_partials = nullptr;  // [kGradNormPartials] sums of squares (grad_norm_partials)
  float max_norm = 0.0f;                  // plan-time clip_grad; <= 0 turns clipping off (coefficient 1)
  float* grad_norm = nullptr;             // device scalar OUT
  float* clip_coefficient = nullptr;      // device scalar OUT: 1 when clipping is off or the norm non-finite
  int32_t* grad_nonfinite = nullptr;      // device flag: set to 1 when the norm is NaN/inf, never cleared here
  // The loss check.
  const float* loss = nullptr;        // device scalar: the step loss, final (summed over ranks)
  int32_t* loss_nonfinite = nullptr;  // device flag: set to 1 when the loss is NaN/inf, never cleared here
  // Learning rate, weight decay and AdamW's constants, from the steps done.
  LrScheduleConfig schedule;                      // plan-time
  WeightDecayScheduleConfig weight_decay;         // plan-time
  AdamWHyperparams adamw;                         // plan-time: beta1, beta2 used here
  int64_t* step_counter = nullptr;                // device scalar IN: steps done; OUT: steps done + 1
  float* lr = nullptr;                            // device scalar OUT: the lr of this step's update
  AdamWStepConstants* adamw_constants = nullptr;  // device OUT: for adamw_step's update t = steps done + 1
  // The RNG states' advance (nullptr or count 0: none).
  rng::RngState* rng_states = nullptr;  // device [rng_count]: offset += rng_advance_by
  int64_t rng_count = 0;                 // at most kMaxStepScalarsRngStates
  uint64_t rng_advance_by = 0;
};
inline constexpr int64_t kMaxStepScalarsRngStates = 512;

void optimizer_step_scalars(cudaStream_t stream, const OptimizerStepScalarsParams& p);

}  // namespace sg::kernels
