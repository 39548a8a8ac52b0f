#include "kernels/lr_schedule.h"

#include "core/error.h"
#include "core/strings.h"
#include "cuda/check.h"

namespace sg::kernels {
namespace {

// Same expression as the CPU twin (std::cos(std::numbers::pi * p)), so both round alike.
constexpr double kPi = 3.141592653589793238462643383279502884;

__global__ void lr_schedule_kernel(LrScheduleConfig s, const int64_t* __restrict__ step_counter,
                                   float* __restrict__ lr_out) {
  const int64_t step = *step_counter;
  const double lr = s.lr, min_lr = s.min_lr;
  float out;
  if (step < s.warmup_iters) {
    out = static_cast<float>(lr * static_cast<double>(step + 1) / static_cast<double>(s.warmup_iters));
  } else if (s.style == LrScheduleConfig::Style::constant) {
    out = s.lr;
  } else if (step >= s.decay_iters) {
    out = s.min_lr;
  } else {
    const double progress = static_cast<double>(step - s.warmup_iters) /
                            static_cast<double>(s.decay_iters - s.warmup_iters);
    if (s.style == LrScheduleConfig::Style::linear) {
      out = static_cast<float>(min_lr + (lr - min_lr) * (1.0 - progress));
    } else {
      out = static_cast<float>(min_lr + (lr - min_lr) * 0.5 * (1.0 + cos(kPi * progress)));
    }
  }
  *lr_out = out;
}

__global__ void increment_step_kernel(int64_t* step_counter) { *step_counter += 1; }

}  // namespace

void lr_schedule_update(cudaStream_t stream, const LrScheduleParams& p) {
  SG_CHECK(p.step_counter && p.lr, "lr_schedule_update: step_counter and lr must be device pointers");
  SG_CHECK(p.schedule.warmup_iters >= 0 && p.schedule.decay_iters >= 0,
           strprintf("lr_schedule_update: warmup_iters=%lld and decay_iters=%lld must be >= 0",
                     (long long)p.schedule.warmup_iters, (long long)p.schedule.decay_iters));
  lr_schedule_kernel<<<1, 1, 0, stream>>>(p.schedule, p.step_counter, p.lr);
  SG_CUDA_CHECK_LAUNCH("lr_schedule_kernel");
}

void increment_step_counter(cudaStream_t stream, int64_t* step_counter) {
  SG_CHECK(step_counter != nullptr, "increment_step_counter: step_counter must be a device pointer");
  increment_step_kernel<<<1, 1, 0, stream>>>(step_counter);
  SG_CUDA_CHECK_LAUNCH("increment_step_kernel");
}

}  // namespace sg::kernels
