// GPU lr schedule and step counter against reference/lr_schedule: every style at the boundary steps,
// within 1e-6 relative (both compute in fp64 and round to fp32). The lr output is poisoned first.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "cuda/stream.h"
#include "gpu_test_util.h"
#include "kernels/lr_schedule.h"
#include "reference/lr_schedule.h"

namespace {

using namespace sg;
using namespace sg::test;

ref::LrSchedule to_ref(const kernels::LrScheduleConfig& k) {
  ref::LrSchedule r;
  r.lr = k.lr;
  r.min_lr = k.min_lr;
  r.warmup_iters = k.warmup_iters;
  r.decay_iters = k.decay_iters;
  r.style = k.style == kernels::LrScheduleConfig::Style::constant ? ref::LrSchedule::Style::constant
            : k.style == kernels::LrScheduleConfig::Style::linear ? ref::LrSchedule::Style::linear
                                                                  : ref::LrSchedule::Style::cosine;
  return r;
}

TEST(LrScheduleGpu, MatchesReferenceAtBoundaries) {
  using Style = kernels::LrScheduleConfig::Style;
  cuda::Stream stream;
  DeviceBuffer<int64_t> d_step(1);
  DeviceBuffer<float> d_lr(1);
  for (const Style style : {Style::constant, Style::linear, Style::cosine}) {
    for (const int64_t warmup : {int64_t{0}, int64_t{1}, int64_t{2000}}) {
      kernels::LrScheduleConfig s;
      s.lr = 3e-4f;
      s.min_lr = 3e-5f;
      s.warmup_iters = warmup;
      s.decay_iters = 10000;
      s.style = style;
      const ref::LrSchedule r = to_ref(s);
      for (const int64_t step : {int64_t{0}, warmup - 1, warmup, warmup + 1, int64_t{3333}, int64_t{9999},
                                 int64_t{10000}, int64_t{10001}, int64_t{1} << 40}) {
        if (step < 0) continue;
        d_step.upload({step});
        d_lr.poison();
        kernels::lr_schedule_update(stream, {s, d_step.get(), d_lr.get()});
        SG_CUDA_CHECK(cudaStreamSynchronize(stream));
        const float got = d_lr.download()[0];
        const float want = ref::lr_at(r, step);
        EXPECT_NEAR(got, want, 1e-6 * std::abs(want))
            << "style " << static_cast<int>(style) << " warmup " << warmup << " step " << step;
      }
    }
  }
}

TEST(LrScheduleGpu, IncrementThenScheduleReadsTheDeviceCounter) {
  cuda::Stream stream;
  DeviceBuffer<int64_t> d_step(1);
  DeviceBuffer<float> d_lr(1);
  kernels::LrScheduleConfig s;
  s.lr = 1e-3f;
  s.min_lr = 0.0f;
  s.warmup_iters = 10;
  s.decay_iters = 20;
  s.style = kernels::LrScheduleConfig::Style::linear;
  d_step.upload({41});
  kernels::increment_step_counter(stream, d_step.get());
  SG_CUDA_CHECK(cudaStreamSynchronize(stream));
  EXPECT_EQ(d_step.download()[0], 42);
  d_step.upload({8});
  d_lr.poison();
  for (int i = 0; i < 3; ++i) kernels::increment_step_counter(stream, d_step.get());  // 8 -> 11
  kernels::lr_schedule_update(stream, {s, d_step.get(), d_lr.get()});
  SG_CUDA_CHECK(cudaStreamSynchronize(stream));
  EXPECT_EQ(d_step.download()[0], 11);
  EXPECT_NEAR(d_lr.download()[0], ref::lr_at(to_ref(s), 11), 1e-6 * 1e-3);  // 1e-3 * 0.9
}

}  // namespace
