// CPU reference lr schedule against Megatron's formulas (OptimizerParamScheduler.get_lr) at the boundary steps, for
// every style and WSD annealing style, and a warmup that starts above 0.
#include "reference/lr_schedule.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numbers>

namespace {

using sg::ref::LrSchedule;
using Style = LrSchedule::Style;

LrSchedule make(Style style) {
  LrSchedule s;
  s.lr = 1e-3f;
  s.min_lr = 1e-4f;
  s.warmup_iters = 10;
  s.decay_iters = 110;  // decay span 100 steps
  s.style = style;
  return s;
}

void expect_lr(const LrSchedule& s, int64_t step, double expected) {
  EXPECT_NEAR(sg::ref::lr_at(s, step), expected, 1e-6 * std::abs(expected) + 1e-12) << "step " << step;
}

TEST(RefLrSchedule, WarmupIsTheSameForAllStyles) {
  for (Style style : {Style::constant, Style::linear, Style::cosine, Style::inverse_square_root, Style::wsd}) {
    LrSchedule s = make(style);
    s.wsd_decay_iters = 20;
    expect_lr(s, 0, 1e-4);  // 1e-3 * 1/10: the first update already has lr > 0
    expect_lr(s, 4, 5e-4);
    expect_lr(s, 9, 1e-3);  // warmup - 1: the last warmup step reaches the peak
  }
}

TEST(RefLrSchedule, Constant) {
  const LrSchedule s = make(Style::constant);
  for (int64_t step : {10, 60, 109, 110, 111, 100000}) expect_lr(s, step, 1e-3);
}

TEST(RefLrSchedule, Linear) {
  const LrSchedule s = make(Style::linear);
  expect_lr(s, 10, 1e-3);                     // warmup: p = 0
  expect_lr(s, 35, 1e-4 + 9e-4 * 0.75);       // p = 0.25
  expect_lr(s, 60, 5.5e-4);                   // p = 0.5
  expect_lr(s, 109, 1e-4 + 9e-4 * 0.01);      // last decay step: p = 0.99
  expect_lr(s, 110, 1e-4);                    // decay end
  expect_lr(s, 111, 1e-4);                    // past the end
  expect_lr(s, 1000000, 1e-4);
}

TEST(RefLrSchedule, Cosine) {
  const LrSchedule s = make(Style::cosine);
  const auto cosine = [](double p) { return 1e-4 + 9e-4 * 0.5 * (1.0 + std::cos(std::numbers::pi * p)); };
  expect_lr(s, 10, 1e-3);
  expect_lr(s, 35, 1e-4 + 9e-4 * 0.5 * (1.0 + std::sqrt(0.5)));  // p = 0.25: cos(pi/4) = sqrt(1/2)
  expect_lr(s, 60, 5.5e-4);                                       // p = 0.5: cos = 0
  expect_lr(s, 109, cosine(0.99));
  expect_lr(s, 110, 1e-4);
  expect_lr(s, 111, 1e-4);
  expect_lr(s, 1000000, 1e-4);
}

TEST(RefLrSchedule, NoWarmupStartsAtPeak) {
  LrSchedule s = make(Style::linear);
  s.warmup_iters = 0;
  expect_lr(s, 0, 1e-3);
  expect_lr(s, 55, 1e-4 + 9e-4 * 0.5);  // p = 55/110
  s.style = Style::cosine;
  expect_lr(s, 0, 1e-3);
}

TEST(RefLrSchedule, DecayEndingAtWarmupGoesStraightToMin) {
  LrSchedule s = make(Style::cosine);
  s.decay_iters = s.warmup_iters;  // empty decay span: no division by zero
  expect_lr(s, 9, 1e-3);
  expect_lr(s, 10, 1e-4);
}

}  // namespace

namespace {

// Megatron's get_lr after the warmup, as it writes it: num_steps and the lengths in samples (g a step).
double megatron_inverse_square_root(double lr, double min_lr, int64_t warmup, int64_t step, int64_t g) {
  const double w = std::max<double>(static_cast<double>(warmup * g), 1.0);
  const double n = std::max<double>(static_cast<double>(step * g), 1.0);
  return std::max(min_lr, lr * std::pow(w, 0.5) / std::pow(n, 0.5));
}

}  // namespace

TEST(RefLrSchedule, InverseSquareRootCountsSamplesAsMegatronDoes) {
  LrSchedule s = make(Style::inverse_square_root);
  s.min_lr = 2e-4f;
  s.decay_iters = 1000;
  for (const int64_t g : {int64_t{1}, int64_t{3}, int64_t{8}}) {
    s.samples_per_step = g;
    expect_lr(s, 10, 1e-3);        // sqrt(10 g / 10 g): the peak right after the warmup
    expect_lr(s, 40, 1e-3 * 0.5);  // sqrt(10 / 40)
    expect_lr(s, 90, 1e-3 / 3.0);  // sqrt(10 / 90)
    expect_lr(s, 250, megatron_inverse_square_root(1e-3, 2e-4, 10, 250, g));  // 2e-4 = min_lr: the floor holds
    expect_lr(s, 999, 2e-4);
    expect_lr(s, 1000, 2e-4);  // the decay's end
  }
  // Without a warmup, Megatron's max(warmup samples, 1) is one sample: the lr falls with the samples done, so the
  // global batch shows. Step 0 is one sample done at most: the peak.
  s.warmup_iters = 0;
  s.min_lr = 0.0f;
  for (const int64_t g : {int64_t{1}, int64_t{4}}) {
    s.samples_per_step = g;
    expect_lr(s, 0, 1e-3);
    expect_lr(s, 1, 1e-3 / std::sqrt(static_cast<double>(g)));
    expect_lr(s, 16, megatron_inverse_square_root(1e-3, 0.0, 0, 16, g));
  }
}

TEST(RefLrSchedule, WsdHoldsThePeakThenAnnealsInEachStyle) {
  LrSchedule s = make(Style::wsd);  // warmup 10, decay ends at 110
  s.wsd_decay_iters = 40;           // annealing from step 70 to 110
  using Decay = LrSchedule::WsdDecay;
  const auto at = [](double coeff) { return 1e-4 + 9e-4 * coeff; };
  for (const Decay decay : {Decay::exponential, Decay::linear, Decay::cosine, Decay::minus_sqrt}) {
    s.wsd_decay = decay;
    expect_lr(s, 10, 1e-3);  // stable
    expect_lr(s, 69, 1e-3);
    expect_lr(s, 70, 1e-3);  // the annealing's start: q = 0
    expect_lr(s, 110, 1e-4);
    expect_lr(s, 200, 1e-4);
  }
  s.wsd_decay = Decay::exponential;
  expect_lr(s, 80, at(2.0 * std::pow(0.5, 0.25) - 1.0));
  expect_lr(s, 90, at(2.0 * std::sqrt(0.5) - 1.0));
  expect_lr(s, 109, at(2.0 * std::pow(0.5, 39.0 / 40.0) - 1.0));
  s.wsd_decay = Decay::linear;
  expect_lr(s, 80, at(0.75));
  expect_lr(s, 90, at(0.5));
  s.wsd_decay = Decay::cosine;
  expect_lr(s, 80, at(0.5 * (1.0 + std::sqrt(0.5))));
  expect_lr(s, 90, at(0.5));
  s.wsd_decay = Decay::minus_sqrt;
  expect_lr(s, 80, at(0.5));  // 1 - sqrt(1/4)
  expect_lr(s, 100, at(1.0 - std::sqrt(0.75)));
  // An annealing phase as long as the decay after the warmup starts at the warmup's end.
  s.wsd_decay = Decay::linear;
  s.wsd_decay_iters = 100;
  expect_lr(s, 10, 1e-3);
  expect_lr(s, 20, at(0.9));
  expect_lr(s, 60, at(0.5));
}

TEST(RefLrSchedule, WarmupRisesFromItsInitLikeMegatronsOneStepLater) {
  for (Style style : {Style::constant, Style::linear, Style::cosine, Style::inverse_square_root, Style::wsd}) {
    LrSchedule s = make(style);
    s.wsd_decay_iters = 20;
    s.warmup_init = 2e-4f;
    // Megatron: init + (peak - init) * n / warmup at n = step + 1 here.
    expect_lr(s, 0, 2e-4 + 8e-4 * 0.1);
    expect_lr(s, 4, 2e-4 + 8e-4 * 0.5);
    expect_lr(s, 9, 1e-3);
    expect_lr(s, 10, 1e-3);
  }
  // With an init of 0 the warmup is the former one, bit for bit.
  const LrSchedule plain = make(Style::linear);
  for (int64_t step = 0; step < 10; ++step) {
    EXPECT_EQ(sg::ref::lr_at(plain, step), static_cast<float>(1e-3f * static_cast<double>(step + 1) / 10.0))
        << "step " << step;
  }
}
