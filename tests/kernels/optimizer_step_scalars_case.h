#pragma once
// optimizer_step_scalars test cases, shared by the GPU test and the CPU-emulated test: the grad norm's
// partial sums (wide magnitudes, so the summation order shows in the bits; zeros; NaN/inf at the first,
// a middle and the last partial; sums whose fp32 norm or fp64 sum overflow; subnormals) under every clip
// setting (clipping active, inactive, off with max_norm 0 and < 0) and finite and non-finite losses with
// the flags set or clear before; every lr style at the warmup and decay boundaries, counters 0, 1 and
// 2^40, with two AdamW configurations; and every weight-decay style (Megatron's schedule) at the start, during,
// at and past its end, a global batch of 1 and of 3 (a length in samples that is no whole number of steps
// included). The reference is reference/optimizer_step_scalars.h.
//
// Checks: the emulator evaluates the kernel's expressions with the host's math, so everything must equal
// the reference bit for bit. On the GPU, the norm (fp64 adds in the same order, IEEE sqrt), clip
// coefficient (IEEE division), flags, counter and AdamW's decay factor (from the GPU's lr) must too; the
// lr and AdamW's bias corrections go through the device's cos/pow and fused multiply-adds, so they may
// differ from the host's by one fp32 ulp, and so may a changing weight decay (its fp64 value rounds to the
// same fp32 but for a rounding tie), so the decay factor is held to one ulp there.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "core/strings.h"
#include "kernels/optimizer_step_scalars.h"
#include "reference/optimizer_step_scalars.h"

namespace sg::test {

struct StepScalarsCase {
  std::string name;
  std::vector<double> partials;  // kGradNormPartials
  float max_norm = 1.0f;
  float loss = 2.5f;
  int32_t grad_nonfinite_before = 0, loss_nonfinite_before = 0;
  kernels::LrScheduleConfig schedule;
  kernels::AdamWHyperparams adamw;
  kernels::WeightDecayScheduleConfig weight_decay;
  int64_t steps_done = 0;
};

// What the kernel left in its outputs.
struct StepScalarsResult {
  float grad_norm, clip_coefficient;
  int32_t grad_nonfinite, loss_nonfinite;
  float lr;
  kernels::AdamWStepConstants adamw;
  int64_t step_counter;
};

inline ref::LrSchedule to_ref(const kernels::LrScheduleConfig& k) {
  // The same fields, the styles in the same order.
  return {.lr = k.lr,
          .min_lr = k.min_lr,
          .warmup_init = k.warmup_init,
          .warmup_iters = k.warmup_iters,
          .decay_iters = k.decay_iters,
          .wsd_decay_iters = k.wsd_decay_iters,
          .samples_per_step = k.samples_per_step,
          .style = static_cast<ref::LrSchedule::Style>(k.style),
          .wsd_decay = static_cast<ref::LrSchedule::WsdDecay>(k.wsd_decay)};
}

inline ref::WeightDecaySchedule to_ref(const kernels::WeightDecayScheduleConfig& k) {
  // The same fields, the styles in the same order.
  return {.start = k.start,
          .end = k.end,
          .incr_samples = k.incr_samples,
          .samples_per_step = k.samples_per_step,
          .style = static_cast<ref::WeightDecaySchedule::Style>(k.style)};
}

// The weight decay is the case's schedule's (ref::optimizer_step_scalars sets it).
inline ref::AdamWConfig to_ref(const kernels::AdamWHyperparams& h) {
  return {.beta1 = h.beta1, .beta2 = h.beta2, .eps = h.eps};
}

inline ref::OptimizerStepScalars reference(const StepScalarsCase& c) {
  return ref::optimizer_step_scalars(c.partials.data(), static_cast<int64_t>(c.partials.size()), c.max_norm, c.loss,
                                     to_ref(c.schedule), to_ref(c.weight_decay), c.steps_done, to_ref(c.adamw));
}

// Sums of squares spread over ~16 decades: adding them in another order changes the low bits.
inline std::vector<double> wide_partials(uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<double> exponent(0.0, 6.0);
  std::vector<double> p(kernels::kGradNormPartials);
  for (double& x : p) x = 1e-4 * std::exp(exponent(gen));
  return p;
}

inline kernels::LrScheduleConfig default_schedule() {
  return {.lr = 3e-4f, .min_lr = 3e-5f, .warmup_iters = 100, .decay_iters = 10000,
          .style = kernels::LrScheduleConfig::Style::cosine};
}

inline const kernels::AdamWHyperparams kAdamWConfigs[] = {{0.9f, 0.999f, 1e-8f}, {0.9f, 0.95f, 1e-8f}};
// A constant decay of 0.1 and none, alternating with kAdamWConfigs.
inline const kernels::WeightDecayScheduleConfig kConstantDecays[] = {{.start = 0.1, .end = 0.1},
                                                                     {.start = 0.0, .end = 0.0}};

// The partial-sum variants x clip settings x losses (the schedule fixed, mid-decay).
inline std::vector<StepScalarsCase> norm_cases() {
  std::vector<std::pair<std::string, std::vector<double>>> variants;
  variants.emplace_back("wide", wide_partials(1));
  variants.emplace_back("zeros", std::vector<double>(kernels::kGradNormPartials, 0.0));
  for (const int at : {0, 517, 1023}) {
    std::vector<double> p = wide_partials(2);
    p[at] = std::numeric_limits<double>::quiet_NaN();
    variants.emplace_back(strprintf("nan_at_%d", at), p);
  }
  std::vector<double> inf = wide_partials(3);
  inf[33] = std::numeric_limits<double>::infinity();
  variants.emplace_back("inf_at_33", inf);
  variants.emplace_back("fp32_norm_overflow", std::vector<double>(kernels::kGradNormPartials, 1e78));
  variants.emplace_back("fp64_sum_overflow", std::vector<double>(kernels::kGradNormPartials, 1e308));
  std::vector<double> tiny(kernels::kGradNormPartials);
  for (size_t i = 0; i < tiny.size(); ++i) tiny[i] = std::numeric_limits<double>::denorm_min() * (i % 3);
  variants.emplace_back("subnormal", tiny);

  const float losses[] = {2.5f, std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
                          -std::numeric_limits<float>::infinity(), 0.0f};
  std::vector<StepScalarsCase> cases;
  int k = 0;
  for (const auto& [name, partials] : variants) {
    const double norm = std::sqrt(ref::sum_norm_partials(partials.data(), static_cast<int64_t>(partials.size())));
    const bool usable = std::isfinite(norm) && norm > 0.0 && norm < 1e30;
    const float clipping = usable ? static_cast<float>(norm * 0.5) : 1.0f;
    const float not_clipping = usable ? static_cast<float>(norm * 2.0 + 1.0) : 3.0f;
    for (const float max_norm : {clipping, not_clipping, 0.0f, -1.0f}) {
      StepScalarsCase c;
      c.name = strprintf("%s_max_norm_%g_case_%d", name.c_str(), max_norm, k);
      c.partials = partials;
      c.max_norm = max_norm;
      c.loss = losses[k % 5];
      c.grad_nonfinite_before = (k / 5) % 2;
      c.loss_nonfinite_before = (k / 3) % 2;
      c.schedule = default_schedule();
      c.adamw = kAdamWConfigs[k % 2];
      c.weight_decay = kConstantDecays[k % 2];
      c.steps_done = 5000 + k;
      cases.push_back(c);
      ++k;
    }
  }
  return cases;
}

// Every lr style (WSD with each annealing style) at the boundary steps of warmups 0, 1 and 2000 (decay ends at
// 10000; WSD anneals over its last 2500 steps), a warmup from 0 and from 1e-5, a global batch of 1 and of 3 (the
// inverse square root counts samples), and step 2^40.
inline std::vector<StepScalarsCase> schedule_cases() {
  using Style = kernels::LrScheduleConfig::Style;
  using WsdDecay = kernels::LrScheduleConfig::WsdDecay;
  const std::vector<double> partials = wide_partials(4);
  struct Shape {
    Style style;
    WsdDecay wsd_decay = WsdDecay::exponential;
  };
  const std::vector<Shape> shapes = {{Style::constant},
                                     {Style::linear},
                                     {Style::cosine},
                                     {Style::inverse_square_root},
                                     {Style::wsd, WsdDecay::exponential},
                                     {Style::wsd, WsdDecay::linear},
                                     {Style::wsd, WsdDecay::cosine},
                                     {Style::wsd, WsdDecay::minus_sqrt}};
  std::vector<StepScalarsCase> cases;
  int k = 0;
  for (const Shape& shape : shapes) {
    for (const int64_t warmup : {int64_t{0}, int64_t{1}, int64_t{2000}}) {
      for (const int64_t step :
           {int64_t{0}, int64_t{1}, warmup - 1, warmup, warmup + 1, int64_t{3333}, int64_t{7500}, int64_t{7501},
            int64_t{8750}, int64_t{9999}, int64_t{10000}, int64_t{10001}, int64_t{1} << 40}) {
        if (step < 0) continue;
        StepScalarsCase c;
        c.name =
            strprintf("style_%d_%d_warmup_%lld_step_%lld", static_cast<int>(shape.style),
                      static_cast<int>(shape.wsd_decay), static_cast<long long>(warmup), static_cast<long long>(step));
        c.partials = partials;
        c.schedule = {.lr = 3e-4f,
                      .min_lr = 3e-5f,
                      .warmup_init = k % 2 == 0 ? 0.0f : 1e-5f,
                      .warmup_iters = warmup,
                      .decay_iters = 10000,
                      .wsd_decay_iters = 2500,
                      .samples_per_step = k % 3 == 0 ? 3 : 1,
                      .style = shape.style,
                      .wsd_decay = shape.wsd_decay};
        c.adamw = kAdamWConfigs[k % 2];
        c.weight_decay = kConstantDecays[k % 2];
        c.steps_done = step;
        cases.push_back(c);
        ++k;
      }
    }
  }
  return cases;
}

// Every weight-decay style from 0.033 to 0.1 over 12 samples, with a global batch of 1 (12 steps) and of 5 (2.4
// steps, as train_samples 12 that is no whole number of batches): the steps at the start, during, at and past the
// end, and 2^40; the lr in its warmup and decay.
inline std::vector<StepScalarsCase> weight_decay_cases() {
  using Style = kernels::WeightDecayScheduleConfig::Style;
  StepScalarsCase base;
  base.partials = wide_partials(5);
  base.schedule = {.lr = 3e-4f,
                   .min_lr = 3e-5f,
                   .warmup_iters = 2,
                   .decay_iters = 20,
                   .style = kernels::LrScheduleConfig::Style::cosine};
  std::vector<StepScalarsCase> cases;
  for (const Style style : {Style::constant, Style::linear, Style::cosine}) {
    for (const int64_t batch : {int64_t{1}, int64_t{5}}) {
      for (const int64_t step : {int64_t{0}, int64_t{1}, int64_t{2}, int64_t{3}, int64_t{5}, int64_t{11}, int64_t{12},
                                 int64_t{13}, int64_t{1} << 40}) {
        StepScalarsCase c = base;
        c.name = strprintf("wd_style_%d_batch_%lld_step_%lld", static_cast<int>(style), static_cast<long long>(batch),
                           static_cast<long long>(step));
        c.adamw = kAdamWConfigs[cases.size() % 2];
        c.weight_decay = {.start = 0.033,
                          .end = style == Style::constant ? 0.033 : 0.1,
                          .incr_samples = 12,
                          .samples_per_step = batch,
                          .style = style};
        c.steps_done = step;
        cases.push_back(c);
      }
    }
  }
  return cases;
}

inline bool same_bits(float a, float b) { return std::bit_cast<uint32_t>(a) == std::bit_cast<uint32_t>(b); }

// |a - b| in fp32 ulps (a, b finite, same sign).
inline int64_t ulps_apart(float a, float b) {
  const int64_t d = static_cast<int64_t>(std::bit_cast<int32_t>(a)) - std::bit_cast<int32_t>(b);
  return d < 0 ? -d : d;
}

enum class Math { host, device };

inline void expect_matches_reference(const StepScalarsCase& c, const StepScalarsResult& got, Math math) {
  const ref::OptimizerStepScalars want = reference(c);
  SCOPED_TRACE(c.name);
  if (std::isnan(want.grad_norm)) {
    EXPECT_TRUE(std::isnan(got.grad_norm)) << got.grad_norm;
  } else {
    EXPECT_TRUE(same_bits(got.grad_norm, want.grad_norm)) << got.grad_norm << " vs " << want.grad_norm;
  }
  EXPECT_TRUE(same_bits(got.clip_coefficient, want.clip_coefficient))
      << got.clip_coefficient << " vs " << want.clip_coefficient;
  EXPECT_EQ(got.grad_nonfinite, want.grad_nonfinite || c.grad_nonfinite_before ? 1 : 0);
  EXPECT_EQ(got.loss_nonfinite, want.loss_nonfinite || c.loss_nonfinite_before ? 1 : 0);
  EXPECT_EQ(got.step_counter, c.steps_done + 1);
  // AdamW's constants from the lr the kernel computed (the same lr as the reference's, up to an ulp on the GPU)
  // and the reference's weight decay.
  ref::AdamWConfig config = to_ref(c.adamw);
  config.weight_decay = want.weight_decay;
  const ref::AdamWStepConstants from_lr = ref::adamw_step_constants(got.lr, c.steps_done + 1, config);
  if (math == Math::host || c.weight_decay.style == kernels::WeightDecayScheduleConfig::Style::constant) {
    EXPECT_TRUE(same_bits(got.adamw.decay_factor, from_lr.decay_factor))
        << got.adamw.decay_factor << " vs " << from_lr.decay_factor;
  } else {
    EXPECT_LE(ulps_apart(got.adamw.decay_factor, from_lr.decay_factor), 1)
        << got.adamw.decay_factor << " vs " << from_lr.decay_factor;
  }
  if (math == Math::host) {
    EXPECT_TRUE(same_bits(got.adamw.decay_factor, want.adamw.decay_factor))
        << got.adamw.decay_factor << " vs " << want.adamw.decay_factor;
    EXPECT_TRUE(same_bits(got.lr, want.lr)) << got.lr << " vs " << want.lr;
    EXPECT_TRUE(same_bits(got.adamw.step_size, want.adamw.step_size))
        << got.adamw.step_size << " vs " << want.adamw.step_size;
    EXPECT_TRUE(same_bits(got.adamw.bias_correction2_sqrt, want.adamw.bias_correction2_sqrt))
        << got.adamw.bias_correction2_sqrt << " vs " << want.adamw.bias_correction2_sqrt;
  } else {
    EXPECT_LE(ulps_apart(got.lr, want.lr), 1) << got.lr << " vs " << want.lr;
    EXPECT_LE(ulps_apart(got.adamw.step_size, from_lr.step_size), 1)
        << got.adamw.step_size << " vs " << from_lr.step_size;
    EXPECT_LE(ulps_apart(got.adamw.bias_correction2_sqrt, from_lr.bias_correction2_sqrt), 1)
        << got.adamw.bias_correction2_sqrt << " vs " << from_lr.bias_correction2_sqrt;
  }
}

}  // namespace sg::test
