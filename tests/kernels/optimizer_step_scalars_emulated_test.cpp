// The optimizer's per-step scalars kernel (src/kernels/optimizer_step_scalars.cuh), run on the CPU by
// tests/simt_emulator.h with the launcher's own checks: bit for bit the reference (the formulas of the
// grad-norm finalize, loss check, lr schedule and AdamW bias corrections it replaced, and Megatron's weight-decay
// schedule) on the cases of optimizer_step_scalars_case.h, every output poisoned first.
#define SG_SIMT_EMULATION 1
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "kernels/optimizer_step_scalars.cuh"
#include "kernels/optimizer_step_scalars_case.h"
#include "test_util.h"

namespace sg {
namespace {

using test::StepScalarsCase;
using test::StepScalarsResult;

// The case's launch with its outputs in `r` (host memory: the emulator's "device").
kernels::OptimizerStepScalarsParams params_for(const StepScalarsCase& c, const float* loss, StepScalarsResult& r) {
  return {.norm_partials = c.partials.data(),
          .max_norm = c.max_norm,
          .grad_norm = &r.grad_norm,
          .clip_coefficient = &r.clip_coefficient,
          .grad_nonfinite = &r.grad_nonfinite,
          .loss = loss,
          .loss_nonfinite = &r.loss_nonfinite,
          .schedule = c.schedule,
          .weight_decay = c.weight_decay,
          .adamw = c.adamw,
          .step_counter = &r.step_counter,
          .lr = &r.lr,
          .adamw_constants = &r.adamw};
}

// Every float output starts as NaN, so one the kernel forgets fails; flags and counter as the case gives.
StepScalarsResult run_emulated(const StepScalarsCase& c) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  StepScalarsResult r{.grad_norm = nan,
                      .clip_coefficient = nan,
                      .grad_nonfinite = c.grad_nonfinite_before,
                      .loss_nonfinite = c.loss_nonfinite_before,
                      .lr = nan,
                      .adamw = {.step_size = nan, .bias_correction2_sqrt = nan, .decay_factor = nan},
                      .step_counter = c.steps_done};
  kernels::optimizer_scalars::run(emu::Launch{}, params_for(c, &c.loss, r));
  return r;
}

TEST(OptimizerStepScalarsEmulated, NormClipAndFlagsMatchReferenceBitwise) {
  for (const StepScalarsCase& c : test::norm_cases()) {
    test::expect_matches_reference(c, run_emulated(c), test::Math::host);
  }
}

TEST(OptimizerStepScalarsEmulated, LrAndAdamWConstantsMatchReferenceBitwise) {
  for (const StepScalarsCase& c : test::schedule_cases()) {
    test::expect_matches_reference(c, run_emulated(c), test::Math::host);
  }
}

// The kernel's block sum of the partials (its fp64 total, which the fp32 norm mostly rounds away), bitwise
// the reference's order; the wide partials give other bits when added in another order (one after the
// other here), so these checks see the order.
TEST(OptimizerStepScalarsEmulated, BlockSumIsBitwiseTheReferenceOrder) {
  namespace os = kernels::optimizer_scalars;
  int orders_differ = 0;
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    const std::vector<double> p = test::wide_partials(seed);
    double total = NAN;
    emu::launch(dim3(1), os::kThreads, sizeof(double) * os::kWarps, [&] {
      const int t = kernels::detail::thread_index();
      const double sum = os::block_sum_partials(p[t], reinterpret_cast<double*>(kernels::detail::dynamic_smem()));
      if (t == 0) total = sum;
    });
    const double fixed = ref::sum_norm_partials(p.data(), static_cast<int64_t>(p.size()));
    EXPECT_EQ(std::bit_cast<uint64_t>(total), std::bit_cast<uint64_t>(fixed)) << "seed " << seed;
    const double in_order = std::accumulate(p.begin(), p.end(), 0.0);
    orders_differ += in_order != fixed;
    EXPECT_NEAR(in_order, fixed, 1e-12 * fixed);
  }
  EXPECT_GE(orders_differ, 6) << "the partials must tell summation orders apart";
}

TEST(OptimizerStepScalarsEmulated, WeightDecayAndAdamWConstantsMatchReferenceBitwise) {
  for (const StepScalarsCase& c : test::weight_decay_cases()) {
    test::expect_matches_reference(c, run_emulated(c), test::Math::host);
  }
}

// A run's steps, one launch each on the counter the last one advanced: every style's decay factor bitwise the
// CPU twin's (so the GPU and the CPU backends decay alike), a changing decay's factor changing from step to step.
TEST(OptimizerStepScalarsEmulated, RepeatedStepsFollowTheWeightDecaySchedule) {
  using Style = kernels::WeightDecayScheduleConfig::Style;
  for (const Style style : {Style::constant, Style::linear, Style::cosine}) {
    StepScalarsCase c = test::weight_decay_cases().front();
    c.schedule = {.lr = 1e-3f,
                  .min_lr = 1e-5f,
                  .warmup_iters = 3,
                  .decay_iters = 50,
                  .style = kernels::LrScheduleConfig::Style::cosine};
    c.weight_decay = {.start = 0.0,
                      .end = style == Style::constant ? 0.0 : 0.1,
                      .incr_samples = 40 * 4,
                      .samples_per_step = 4,
                      .style = style};
    StepScalarsResult r{};
    int changed = 0;
    float last_decay = 0.0f;
    for (int64_t step = 0; step < 45; ++step) {
      kernels::optimizer_scalars::run(emu::Launch{}, params_for(c, &c.loss, r));
      StepScalarsCase at = c;
      at.steps_done = step;
      const ref::OptimizerStepScalars want = test::reference(at);
      EXPECT_TRUE(test::same_bits(r.adamw.decay_factor, want.adamw.decay_factor))
          << "style " << static_cast<int>(style) << " step " << step << ": " << r.adamw.decay_factor << " vs "
          << want.adamw.decay_factor;
      const float decay = want.weight_decay;
      changed += step > 0 && decay != last_decay;
      last_decay = decay;
    }
    EXPECT_EQ(last_decay, static_cast<float>(c.weight_decay.end)) << "past the end: the end decay";
    EXPECT_EQ(changed, style == Style::constant ? 0 : 40) << "style " << static_cast<int>(style);
  }
}

TEST(OptimizerStepScalarsEmulated, RepeatedStepsAdvanceTheCounter) {
  StepScalarsCase c = test::schedule_cases().front();
  c.schedule = {.lr = 1e-3f, .min_lr = 0.0f, .warmup_iters = 2, .decay_iters = 6,
                .style = kernels::LrScheduleConfig::Style::linear};
  StepScalarsResult r{};
  for (int64_t step = 0; step < 8; ++step) {
    kernels::optimizer_scalars::run(emu::Launch{}, params_for(c, &c.loss, r));
    EXPECT_EQ(r.step_counter, step + 1);
    EXPECT_EQ(r.lr, ref::lr_at(test::to_ref(c.schedule), step)) << "step " << step;
  }
}

TEST(OptimizerStepScalarsEmulated, AdvancesEveryRngStateAndNothingElse) {
  const StepScalarsCase c = test::schedule_cases().front();
  for (const int64_t count : {int64_t{0}, int64_t{1}, int64_t{3}, kernels::kMaxStepScalarsRngStates}) {
    // One state past the count: it must stay as it was.
    std::vector<rng::RngState> states(static_cast<size_t>(count) + 1);
    for (size_t i = 0; i < states.size(); ++i) states[i] = {.seed = 1000 + i, .offset = (uint64_t{1} << 40) + 7 * i};
    const std::vector<rng::RngState> before = states;
    StepScalarsResult r{};
    kernels::OptimizerStepScalarsParams p = params_for(c, &c.loss, r);
    p.rng_states = states.data();
    p.rng_count = count;
    p.rng_advance_by = 5;
    kernels::optimizer_scalars::run(emu::Launch{}, p);
    for (size_t i = 0; i < states.size(); ++i) {
      EXPECT_EQ(states[i].seed, before[i].seed) << "count " << count << " state " << i;
      EXPECT_EQ(states[i].offset, before[i].offset + (static_cast<int64_t>(i) < count ? 5u : 0u))
          << "count " << count << " state " << i;
    }
  }
}

TEST(OptimizerStepScalarsEmulated, LauncherRejectsMissingPointersAndNegativeIters) {
  const StepScalarsCase c = test::schedule_cases().front();
  StepScalarsResult r{};
  kernels::OptimizerStepScalarsParams p = params_for(c, &c.loss, r);
  p.adamw_constants = nullptr;
  EXPECT_NE(test::thrown_message([&] { kernels::optimizer_scalars::run(emu::Launch{}, p); }).find("adamw_constants"),
            std::string::npos);
  p.adamw_constants = &r.adamw;
  p.schedule.warmup_iters = -1;
  EXPECT_NE(test::thrown_message([&] { kernels::optimizer_scalars::run(emu::Launch{}, p); }).find("warmup_iters=-1"),
            std::string::npos);
  p.schedule.warmup_iters = 0;
  p.weight_decay = {
      .start = 0.0, .end = 0.1, .incr_samples = 0, .style = kernels::WeightDecayScheduleConfig::Style::linear};
  EXPECT_NE(test::thrown_message([&] { kernels::optimizer_scalars::run(emu::Launch{}, p); }).find("incr_samples=0"),
            std::string::npos);
  p.weight_decay.incr_samples = 10;
  p.rng_count = 2;  // without states
  EXPECT_NE(test::thrown_message([&] { kernels::optimizer_scalars::run(emu::Launch{}, p); }).find("rng_count=2"),
            std::string::npos);
  p.rng_count = kernels::kMaxStepScalarsRngStates + 1;
  std::vector<rng::RngState> states(static_cast<size_t>(p.rng_count));
  p.rng_states = states.data();
  EXPECT_THROW(kernels::optimizer_scalars::run(emu::Launch{}, p), Error);
  EXPECT_EQ(r.step_counter, 0) << "a rejected launch runs nothing";
}

}  // namespace
}  // namespace sg
