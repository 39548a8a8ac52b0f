// CPU reference lr schedule against its formula at the boundary steps, for all three styles.
#include "reference/lr_schedule.h"

#include <gtest/gtest.h>

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
  for (Style style : {Style::constant, Style::linear, Style::cosine}) {
    const LrSchedule s = make(style);
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
