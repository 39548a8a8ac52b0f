#pragma once
// Kernel and launch sequence of optimizer_step_scalars (kernels/optimizer_step_scalars.h), written over a
// launch policy so the CPU emulator of the tests runs the same code as the launcher (detail::CudaLaunch).
// The formulas are those of the kernels this one replaced (grad-norm finalize, loss check, lr schedule,
// AdamW's per-thread bias corrections, step increment), expression for expression, so the bits are too; the
// weight decay's is ref::weight_decay_at's (reference/weight_decay_schedule.h).
#include <cmath>

#include "core/error.h"
#include "core/strings.h"
#include "kernels/common.cuh"
#include "kernels/optimizer_step_scalars.h"

namespace sg::kernels::optimizer_scalars {
SG_EMULATED_NAMESPACE_BEGIN

inline constexpr int kThreads = kGradNormPartials;  // one partial per thread
inline constexpr int kWarps = kThreads / 32;
static_assert(kThreads == 1024, "one block of 1024 threads sums the partials (cub::BlockReduce<double, 1024>'s order)");
// Lane 0 of warp 1: computes the loss flag, lr, weight decay, AdamW's constants and the counter while thread 0 adds the
// warp sums.
inline constexpr int kScheduleThread = 32;
// Threads kRngFirstThread.. advance one RNG state each (warps 16..31, idle but for the block sum).
inline constexpr int kRngFirstThread = kThreads - static_cast<int>(kMaxStepScalarsRngStates);
static_assert(kRngFirstThread > kScheduleThread, "the RNG threads are neither thread 0 nor the schedule's");

// Same expression as the CPU twin (std::cos(std::numbers::pi * p)), so both round alike.
inline constexpr double kPi = 3.141592653589793238462643383279502884;

SG_DEVICE bool is_finite(float x) {
#if defined(SG_SIMT_EMULATION)
  return std::isfinite(x);
#else
  return isfinite(x);
#endif
}

// Every lane's value from the lane `delta` above (its own past lane 31).
SG_DEVICE double shfl_down_f64(double v, int delta) {
#if defined(SG_SIMT_EMULATION)
  float halves[2];  // the emulator shuffles 32-bit words; the bits travel unchanged
  __builtin_memcpy(halves, &v, sizeof(v));
  halves[0] = detail::shfl_down(halves[0], delta);
  halves[1] = detail::shfl_down(halves[1], delta);
  __builtin_memcpy(&v, halves, sizeof(v));
  return v;
#else
  return __shfl_down_sync(0xffffffffu, v, delta);
#endif
}

// Lane 0 ends with the warp's 32 values summed as a pairwise tree, ((v0 + v1) + (v2 + v3)) + ...: the
// order of cub's WarpReduce (shuffles down by 1, 2, 4, 8, 16). Every lane must call it.
SG_DEVICE double warp_tree_sum(double v) {
SG_UNROLL
  for (int offset = 1; offset < 32; offset <<= 1) v += shfl_down_f64(v, offset);
  return v;
}

// step = optimizer steps done so far; see kernels/lr_schedule.h.
SG_DEVICE float scheduled_lr(const LrScheduleConfig& s, int64_t step) {
  using Style = LrScheduleConfig::Style;
  using WsdDecay = LrScheduleConfig::WsdDecay;
  const double lr = s.lr, min_lr = s.min_lr;
  if (step < s.warmup_iters) {
    const double init = s.warmup_init;
    return static_cast<float>(init + (lr - init) * static_cast<double>(step + 1) / static_cast<double>(s.warmup_iters));
  }
  if (s.style == Style::constant) return s.lr;
  if (step >= s.decay_iters) return s.min_lr;
  if (s.style == Style::inverse_square_root) {
    const double g = static_cast<double>(s.samples_per_step);
    const double warmup = fmax(static_cast<double>(s.warmup_iters) * g, 1.0);
    const double done = fmax(static_cast<double>(step) * g, 1.0);
    return static_cast<float>(fmax(min_lr, lr * sqrt(warmup) / sqrt(done)));
  }
  double coeff = 1.0;
  if (s.style == Style::wsd) {
    const int64_t anneal_start = s.decay_iters - s.wsd_decay_iters;
    if (step > anneal_start) {
      const double q = static_cast<double>(step - anneal_start) / static_cast<double>(s.wsd_decay_iters);
      switch (s.wsd_decay) {
        case WsdDecay::exponential: coeff = 2.0 * pow(0.5, q) - 1.0; break;
        case WsdDecay::linear: coeff = 1.0 - q; break;
        case WsdDecay::cosine: coeff = 0.5 * (1.0 + cos(kPi * q)); break;
        case WsdDecay::minus_sqrt: coeff = 1.0 - sqrt(q); break;
      }
    }
    return static_cast<float>(min_lr + (lr - min_lr) * coeff);
  }
  const double progress =
      static_cast<double>(step - s.warmup_iters) / static_cast<double>(s.decay_iters - s.warmup_iters);
  if (s.style == Style::linear) return static_cast<float>(min_lr + (lr - min_lr) * (1.0 - progress));
  return static_cast<float>(min_lr + (lr - min_lr) * 0.5 * (1.0 + cos(kPi * progress)));
}

// steps_done = optimizer steps done so far; see kernels/weight_decay_schedule.h (ref::weight_decay_at).
SG_DEVICE float scheduled_weight_decay(const WeightDecayScheduleConfig& s, int64_t steps_done) {
  if (s.style == WeightDecayScheduleConfig::Style::constant) return static_cast<float>(s.start);
  // n > incr_samples without forming n (steps_done * samples_per_step may not fit in int64 far past the end).
  if (steps_done > s.incr_samples / s.samples_per_step) return static_cast<float>(s.end);
  const double ratio = static_cast<double>(steps_done * s.samples_per_step) / static_cast<double>(s.incr_samples);
  const double coeff =
      s.style == WeightDecayScheduleConfig::Style::linear ? ratio : 0.5 * (cos(kPi * (1.0 - ratio)) + 1.0);
  return static_cast<float>(s.start + coeff * (s.end - s.start));
}

// Update t (1-based): bias corrections in fp64, rounded to fp32 (ref::adamw_step_constants).
SG_DEVICE AdamWStepConstants adamw_step_constants(float lr, int64_t t, const AdamWHyperparams& h, float weight_decay) {
  const double td = static_cast<double>(t);
  return {.step_size = static_cast<float>(lr / (1.0 - pow(static_cast<double>(h.beta1), td))),
          .bias_correction2_sqrt = static_cast<float>(sqrt(1.0 - pow(static_cast<double>(h.beta2), td))),
          .decay_factor = 1.0f - lr * weight_decay};
}

// Norm, clip coefficient (ref::clip_coefficient: a non-finite norm -> 1) and the sticky flag.
SG_DEVICE void write_norm_and_clip(const OptimizerStepScalarsParams& p, double sum_sq) {
  const float norm = static_cast<float>(sqrt(sum_sq));
  *p.grad_norm = norm;
  float coef = 1.0f;
  if (p.max_norm > 0.0f && is_finite(norm)) {
    const float c = p.max_norm / (norm + 1e-6f);
    coef = c < 1.0f ? c : 1.0f;
  }
  *p.clip_coefficient = coef;
  if (!is_finite(norm)) *p.grad_nonfinite = 1;
}

SG_DEVICE void write_schedule(const OptimizerStepScalarsParams& p) {
  if (!is_finite(*p.loss)) *p.loss_nonfinite = 1;
  const int64_t steps_done = *p.step_counter;
  const float lr = scheduled_lr(p.schedule, steps_done);
  *p.lr = lr;
  *p.adamw_constants =
      adamw_step_constants(lr, steps_done + 1, p.adamw, scheduled_weight_decay(p.weight_decay, steps_done));
  *p.step_counter = steps_done + 1;
}

// The sum of one value per thread of the kThreads-thread block, in cub::BlockReduce<double, 1024>'s order:
// each warp's pairwise tree, then thread 0 adds warp 1's .. warp 31's sums to warp 0's, one after the
// other. The result is valid in thread 0 only. `warp_sums`: kWarps doubles of shared memory. Every thread
// must call it (it synchronises).
SG_DEVICE double block_sum_partials(double v, double* warp_sums) {
  const double warp_sum = warp_tree_sum(v);
  if (detail::lane_id() == 0) warp_sums[detail::warp_id()] = warp_sum;
  detail::block_sync();
  double sum = warp_sum;
  if (detail::thread_index() == 0) {
SG_UNROLL
    for (int w = 1; w < kWarps; ++w) sum += warp_sums[w];
  }
  return sum;
}

// A template so that a test's .cu may include this header too (weak symbols, no clash with the launcher's).
template <int kBlockThreads = kThreads>
SG_KERNEL(kBlockThreads) optimizer_step_scalars_kernel(OptimizerStepScalarsParams p) {
  static_assert(kBlockThreads == kThreads, "one thread per partial");
  double* warp_sums = reinterpret_cast<double*>(detail::dynamic_smem());  // [kWarps]
  const int t = detail::thread_index();
  if (t >= kRngFirstThread && t - kRngFirstThread < p.rng_count) p.rng_states[t - kRngFirstThread].offset += p.rng_advance_by;
  const double sum_sq = block_sum_partials(p.norm_partials[t], warp_sums);
  if (t == 0) {
    write_norm_and_clip(p, sum_sq);
  } else if (t == kScheduleThread) {  // meanwhile: the scalars that do not depend on the norm
    write_schedule(p);
  }
}

template <class Launch>
void run(const Launch& launch, const OptimizerStepScalarsParams& p) {
  SG_CHECK(p.norm_partials && p.grad_norm && p.clip_coefficient && p.grad_nonfinite && p.loss && p.loss_nonfinite &&
               p.step_counter && p.lr && p.adamw_constants,
           "optimizer_step_scalars: norm_partials, grad_norm, clip_coefficient, grad_nonfinite, loss, "
           "loss_nonfinite, step_counter, lr and adamw_constants must all be device pointers");
  SG_CHECK(p.schedule.warmup_iters >= 0 && p.schedule.decay_iters >= 0,
           strprintf("optimizer_step_scalars: lr schedule warmup_iters=%lld and decay_iters=%lld must be >= 0",
                     static_cast<long long>(p.schedule.warmup_iters), static_cast<long long>(p.schedule.decay_iters)));
  SG_CHECK(
      p.schedule.style != LrScheduleConfig::Style::wsd ||
          (p.schedule.wsd_decay_iters > 0 && p.schedule.wsd_decay_iters <= p.schedule.decay_iters),
      strprintf("optimizer_step_scalars: a WSD lr schedule needs 0 < wsd_decay_iters=%lld <= decay_iters=%lld",
                static_cast<long long>(p.schedule.wsd_decay_iters), static_cast<long long>(p.schedule.decay_iters)));
  SG_CHECK(p.schedule.samples_per_step > 0, strprintf("optimizer_step_scalars: lr schedule samples_per_step=%lld > 0",
                                                      static_cast<long long>(p.schedule.samples_per_step)));
  const WeightDecayScheduleConfig& wd = p.weight_decay;
  SG_CHECK(wd.style == WeightDecayScheduleConfig::Style::constant || (wd.incr_samples > 0 && wd.samples_per_step > 0),
           strprintf("optimizer_step_scalars: a changing weight-decay schedule needs incr_samples=%lld and "
                     "samples_per_step=%lld > 0",
                     static_cast<long long>(wd.incr_samples), static_cast<long long>(wd.samples_per_step)));
  SG_CHECK(p.rng_count >= 0 && p.rng_count <= kMaxStepScalarsRngStates && (p.rng_count == 0 || p.rng_states),
           strprintf("optimizer_step_scalars: rng_count=%lld (0 to %lld, with rng_states a device pointer)",
                     static_cast<long long>(p.rng_count), static_cast<long long>(kMaxStepScalarsRngStates)));
  launch("optimizer_step_scalars_kernel", optimizer_step_scalars_kernel<>, dim3(1), kThreads,
         sizeof(double) * kWarps, p);
}

SG_EMULATED_NAMESPACE_END
}  // namespace sg::kernels::optimizer_scalars
