// GPU AdamW against reference/adamw on fresh random inputs (the step's constants from
// ref::adamw_step_constants, uploaded); plus the whole optimizer tail (grad-norm partials, the optimizer's
// per-step scalars: clip, lr, a cosine weight-decay schedule, AdamW's constants, step increment; AdamW) captured
// in a CUDA graph and replayed, against the CPU reference run step by step.
// Tolerances: fp32 master weights and moments < kFp32RelTol (1e-5) relative error; the bf16 compute
// copy must equal bf16(GPU master) exactly. Outputs are poisoned; a second run is bitwise identical.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "cuda/stream.h"
#include "gpu_test_util.h"
#include "kernels/adamw.h"
#include "kernels/grad_norm.h"
#include "kernels/lr_schedule.h"
#include "kernels/optimizer_step_scalars.h"
#include "reference/adamw.h"
#include "reference/grad_norm.h"
#include "reference/lr_schedule.h"
#include "reference/weight_decay_schedule.h"

namespace {

using namespace sg;
using namespace sg::test;

std::vector<float> random_positive(size_t n, uint64_t seed, float stddev) {
  std::vector<float> v = random_normal(n, seed, stddev);
  for (auto& x : v) x = x * x;
  return v;
}

kernels::AdamWStepConstants to_device(const ref::AdamWStepConstants& c) {
  return {.step_size = c.step_size, .bias_correction2_sqrt = c.bias_correction2_sqrt, .decay_factor = c.decay_factor};
}

void expect_bf16_copy_of(const std::vector<bf16>& compute, const std::vector<float>& master) {
  ASSERT_EQ(compute.size(), master.size());
  const std::vector<bf16> expected = to_bf16(master);
  EXPECT_EQ(std::memcmp(compute.data(), expected.data(), compute.size() * sizeof(bf16)), 0)
      << "bf16 compute weights are not bf16(master)";
}

// Fresh inputs of one AdamW update: weights, gradients and both moments (v positive).
struct AdamWInputs {
  std::vector<float> master0, grads, m0, v0;
};
AdamWInputs random_inputs(int64_t n, uint64_t seed) {
  return {random_normal(n, seed, 0.05f), random_normal(n, seed + 1, 1e-2f), random_normal(n, seed + 2, 1e-3f),
          random_positive(n, seed + 3, 1e-3f)};
}

// The CPU twin over the flat buffer as the step runs it: weight decay on [0, n_decay) only.
void reference_update(std::vector<float>& p, const std::vector<float>& g, std::vector<float>& m, std::vector<float>& v,
                      int64_t n_decay, float lr, float grad_scale, int64_t t, const ref::AdamWConfig& config) {
  const auto n = static_cast<int64_t>(p.size());
  ref::adamw_step(p.data(), g.data(), m.data(), v.data(), n_decay, lr, grad_scale, t, config, true);
  ref::adamw_step(p.data() + n_decay, g.data() + n_decay, m.data() + n_decay, v.data() + n_decay, n - n_decay, lr,
                  grad_scale, t, config, false);
}

struct AdamWCase {
  int64_t n, n_decay;
  bool with_grad_scale;
};

class AdamWGpu : public ::testing::TestWithParam<AdamWCase> {};

TEST_P(AdamWGpu, MatchesReferenceAndDeterministic) {
  const AdamWCase c = GetParam();
  const int64_t n = c.n;
  const AdamWInputs in = random_inputs(n, 77 + n);
  const std::vector<float>&master0 = in.master0, &grads = in.grads, &m0 = in.m0, &v0 = in.v0;
  const float lr = 3e-4f, grad_scale = c.with_grad_scale ? 0.37f : 1.0f;
  const int64_t steps_done = 4;  // this update is t = 5
  const kernels::AdamWHyperparams hyper{0.9f, 0.95f, 1e-8f};

  std::vector<float> ref_p = master0, ref_m = m0, ref_v = v0;
  const ref::AdamWConfig config{hyper.beta1, hyper.beta2, hyper.eps, 0.1f};
  reference_update(ref_p, grads, ref_m, ref_v, c.n_decay, lr, grad_scale, steps_done + 1, config);

  DeviceBuffer<float> d_master(n), d_grads(n), d_m(n), d_v(n), d_scale(1);
  DeviceBuffer<bf16> d_compute(n);
  DeviceBuffer<kernels::AdamWStepConstants> d_constants(1);
  d_grads.upload(grads);
  d_scale.upload({grad_scale});
  d_constants.upload({to_device(ref::adamw_step_constants(lr, steps_done + 1, config))});
  cuda::Stream stream;

  auto run_once = [&]() {
    d_master.upload(master0);
    d_m.upload(m0);
    d_v.upload(v0);
    d_compute.poison();
    kernels::adamw_step(stream, {.master_weights = d_master.get(),
                                 .compute_weights = d_compute.get(),
                                 .grads = d_grads.get(),
                                 .exp_avg = d_m.get(),
                                 .exp_avg_sq = d_v.get(),
                                 .n = n,
                                 .n_decay = c.n_decay,
                                 .step_constants = d_constants.get(),
                                 .grad_scale = c.with_grad_scale ? d_scale.get() : nullptr,
                                 .hyper = hyper});
    SG_CUDA_CHECK(cudaStreamSynchronize(stream));
  };

  run_once();
  const std::vector<float> master = d_master.download(), m = d_m.download(), v = d_v.download();
  const std::vector<bf16> compute = d_compute.download();
  EXPECT_LT(relative_error(master, ref_p), kFp32RelTol);
  EXPECT_LT(relative_error(m, ref_m), kFp32RelTol);
  EXPECT_LT(relative_error(v, ref_v), kFp32RelTol);
  // The update itself (not just the weights, which barely move) must match too.
  std::vector<float> gpu_delta(n), ref_delta(n);
  for (int64_t i = 0; i < n; ++i) {
    gpu_delta[i] = master[i] - master0[i];
    ref_delta[i] = ref_p[i] - master0[i];
  }
  EXPECT_LT(relative_error(gpu_delta, ref_delta), 1e-4);  // differences of nearby fp32 values
  expect_bf16_copy_of(compute, master);

  run_once();
  EXPECT_EQ(std::memcmp(master.data(), d_master.download().data(), n * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(m.data(), d_m.download().data(), n * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(v.data(), d_v.download().data(), n * sizeof(float)), 0);

  // Buffers one element off 16-byte alignment take the scalar loop instead of the 16-byte one: the
  // same per-element update, so bitwise the same results.
  auto shifted = [](const std::vector<float>& x) {
    std::vector<float> y(x.size() + 1, 0.0f);
    std::copy(x.begin(), x.end(), y.begin() + 1);
    return y;
  };
  DeviceBuffer<float> o_master(n + 1), o_grads(n + 1), o_m(n + 1), o_v(n + 1);
  DeviceBuffer<bf16> o_compute(n + 1);
  o_master.upload(shifted(master0));
  o_grads.upload(shifted(grads));
  o_m.upload(shifted(m0));
  o_v.upload(shifted(v0));
  o_compute.poison();
  kernels::adamw_step(stream, {.master_weights = o_master.get() + 1,
                               .compute_weights = o_compute.get() + 1,
                               .grads = o_grads.get() + 1,
                               .exp_avg = o_m.get() + 1,
                               .exp_avg_sq = o_v.get() + 1,
                               .n = n,
                               .n_decay = c.n_decay,
                               .step_constants = d_constants.get(),
                               .grad_scale = c.with_grad_scale ? d_scale.get() : nullptr,
                               .hyper = hyper});
  SG_CUDA_CHECK(cudaStreamSynchronize(stream));
  EXPECT_EQ(std::memcmp(master.data(), o_master.download().data() + 1, n * sizeof(float)), 0)
      << "unaligned (scalar) and aligned (vectorised) AdamW differ";
  EXPECT_EQ(std::memcmp(m.data(), o_m.download().data() + 1, n * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(v.data(), o_v.download().data() + 1, n * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(compute.data(), o_compute.download().data() + 1, n * sizeof(bf16)), 0);
}

INSTANTIATE_TEST_SUITE_P(Sizes, AdamWGpu,
                         ::testing::Values(AdamWCase{1, 1, true}, AdamWCase{1003, 0, true},
                                           AdamWCase{1003, 1003, false}, AdamWCase{1003, 517, true},
                                           AdamWCase{(1 << 20) + 7, (1 << 19) + 3, true},
                                           AdamWCase{(1 << 22) + 1, (1 << 22) - 100, false}));

// Moments stored in bf16 (optimizer.exp_avg_dtype / exp_avg_sq_dtype). Starting from bf16 moment values:
//   - against the fp32-moment kernel on the same inputs: bitwise the same master and compute weights (the
//     update computes in fp32 either way), and each bf16 moment is exactly bf16(that kernel's fp32 moment);
//   - against the CPU twin: weights within kFp32RelTol; a bf16 moment may differ from the twin's by one
//     bf16 step where the fp32 values (within an fp32 step of each other) straddle a rounding tie, which
//     the test bounds to 1 element in 1000;
//   - the scalar path (buffers one element off alignment) gives the same bits as the 16-byte path;
//   - bf16 gradients (ddp.grad_reduce_in_fp32=false) are read widened: bitwise the update of fp32 gradients
//     holding the same (rounded) values, on both paths.
struct Bf16MomentsCase {
  int64_t n, n_decay;
  bool exp_avg_bf16, exp_avg_sq_bf16;
};

class AdamWBf16MomentsGpu : public ::testing::TestWithParam<Bf16MomentsCase> {};

// A moment buffer of either dtype, offset by `shift` elements (1: off the 16-byte path's alignment).
struct DeviceMoment {
  DeviceMoment(bool bf16_storage, int64_t n, int64_t shift)
      : is_bf16(bf16_storage), shift(shift), f32(n + shift), b16(n + shift) {}
  void upload(const std::vector<float>& values) {
    std::vector<float> padded(values.size() + shift, 0.0f);
    std::copy(values.begin(), values.end(), padded.begin() + shift);
    if (is_bf16) {
      b16.upload(to_bf16(padded));
    } else {
      f32.upload(padded);
    }
  }
  std::vector<float> download() {
    std::vector<float> all = is_bf16 ? to_float(b16.download()) : f32.download();
    return {all.begin() + shift, all.end()};
  }
  kernels::FloatBuffer buffer() {
    return is_bf16 ? kernels::FloatBuffer(b16.get() + shift) : kernels::FloatBuffer(f32.get() + shift);
  }
  bool is_bf16;
  int64_t shift;
  DeviceBuffer<float> f32;
  DeviceBuffer<bf16> b16;
};

TEST_P(AdamWBf16MomentsGpu, StorageRoundsOnlyTheMoments) {
  const Bf16MomentsCase c = GetParam();
  const int64_t n = c.n;
  const AdamWInputs in = random_inputs(n, 313 + n);
  const std::vector<float>&master0 = in.master0, &grads = in.grads;
  const std::vector<float> m0 = round_bf16(in.m0), v0 = round_bf16(in.v0);  // as a bf16 run stores them
  const float lr = 3e-4f, grad_scale = 0.61f;
  const kernels::AdamWHyperparams hyper{0.9f, 0.95f, 1e-8f};
  ref::AdamWConfig config{hyper.beta1, hyper.beta2, hyper.eps, 0.1f};
  DeviceBuffer<float> d_grads(n), d_scale(1);
  DeviceBuffer<kernels::AdamWStepConstants> d_constants(1);
  d_grads.upload(grads);
  d_scale.upload({grad_scale});
  d_constants.upload({to_device(ref::adamw_step_constants(lr, 3, config))});
  cuda::Stream stream;

  struct Result {
    std::vector<float> master, m, v;
    std::vector<bf16> compute;
  };
  // grads_bf16: the gradients stored in bf16 (ddp.grad_reduce_in_fp32=false), rounded from `grad_values`
  // (default: the test's gradients).
  const auto run = [&](bool avg_bf16, bool avg_sq_bf16, int64_t shift, bool grads_bf16 = false,
                       const std::vector<float>* grad_values = nullptr) {
    DeviceBuffer<float> d_master(n + shift);
    DeviceBuffer<bf16> d_compute(n + shift);
    DeviceMoment d_m(avg_bf16, n, shift), d_v(avg_sq_bf16, n, shift);
    std::vector<float> padded(n + shift, 0.0f);
    std::copy(master0.begin(), master0.end(), padded.begin() + shift);
    d_master.upload(padded);
    d_m.upload(m0);
    d_v.upload(v0);
    d_compute.poison();
    DeviceMoment d_grads_shifted(grads_bf16, n, shift);  // a gradient buffer of either dtype, shifted the same
    d_grads_shifted.upload(grad_values != nullptr ? *grad_values : grads);
    kernels::adamw_step(stream, {.master_weights = d_master.get() + shift,
                                 .compute_weights = d_compute.get() + shift,
                                 .grads = d_grads_shifted.buffer(),
                                 .exp_avg = d_m.buffer(),
                                 .exp_avg_sq = d_v.buffer(),
                                 .n = n,
                                 .n_decay = c.n_decay,
                                 .step_constants = d_constants.get(),
                                 .grad_scale = d_scale.get(),
                                 .hyper = hyper});
    SG_CUDA_CHECK(cudaStreamSynchronize(stream));
    const std::vector<float> master = d_master.download();
    const std::vector<bf16> compute = d_compute.download();
    return Result{{master.begin() + shift, master.end()}, d_m.download(), d_v.download(),
                  {compute.begin() + shift, compute.end()}};
  };

  const Result fp32 = run(false, false, 0);
  const Result mixed = run(c.exp_avg_bf16, c.exp_avg_sq_bf16, 0);
  EXPECT_EQ(std::memcmp(fp32.master.data(), mixed.master.data(), n * sizeof(float)), 0)
      << "the weight update must not depend on how the moments are stored";
  EXPECT_EQ(std::memcmp(fp32.compute.data(), mixed.compute.data(), n * sizeof(bf16)), 0);
  EXPECT_EQ(mixed.m, c.exp_avg_bf16 ? round_bf16(fp32.m) : fp32.m);
  EXPECT_EQ(mixed.v, c.exp_avg_sq_bf16 ? round_bf16(fp32.v) : fp32.v);

  std::vector<float> ref_p = master0, ref_m = m0, ref_v = v0;
  config.exp_avg_bf16 = c.exp_avg_bf16;
  config.exp_avg_sq_bf16 = c.exp_avg_sq_bf16;
  reference_update(ref_p, grads, ref_m, ref_v, c.n_decay, lr, grad_scale, 3, config);
  EXPECT_LT(relative_error(mixed.master, ref_p), kFp32RelTol);
  const auto expect_moment_near = [&](const std::vector<float>& gpu, const std::vector<float>& cpu, bool bf16_storage,
                                      const char* what) {
    if (!bf16_storage) {
      EXPECT_LT(relative_error(gpu, cpu), kFp32RelTol) << what;
      return;
    }
    int64_t differing = 0;
    for (int64_t i = 0; i < n; ++i) {
      if (gpu[i] == cpu[i]) continue;
      ++differing;
      // One bf16 step at most: 8 significant bits, so a step is at most 2^-7 of the value.
      EXPECT_LE(std::abs(gpu[i] - cpu[i]), std::abs(cpu[i]) / 128.0f) << what << " element " << i;
    }
    EXPECT_LE(differing, std::max<int64_t>(1, n / 1000)) << what << ": bf16 moments differing from the CPU twin";
  };
  expect_moment_near(mixed.m, ref_m, c.exp_avg_bf16, "exp_avg");
  expect_moment_near(mixed.v, ref_v, c.exp_avg_sq_bf16, "exp_avg_sq");
  expect_bf16_copy_of(mixed.compute, mixed.master);

  const Result unaligned = run(c.exp_avg_bf16, c.exp_avg_sq_bf16, 1);
  EXPECT_EQ(std::memcmp(mixed.master.data(), unaligned.master.data(), n * sizeof(float)), 0)
      << "unaligned (scalar) and aligned (vectorised) AdamW differ";
  EXPECT_EQ(mixed.m, unaligned.m);
  EXPECT_EQ(mixed.v, unaligned.v);

  // bf16 gradients are read widened: the same bits as fp32 gradients holding the rounded values, on both paths.
  const std::vector<float> rounded_grads = round_bf16(grads);
  for (const int64_t shift : {int64_t{0}, int64_t{1}}) {
    const Result widened = run(c.exp_avg_bf16, c.exp_avg_sq_bf16, shift, /*grads_bf16=*/true);
    const Result rounded = run(c.exp_avg_bf16, c.exp_avg_sq_bf16, shift, /*grads_bf16=*/false, &rounded_grads);
    EXPECT_EQ(std::memcmp(widened.master.data(), rounded.master.data(), n * sizeof(float)), 0) << "shift " << shift;
    EXPECT_EQ(widened.m, rounded.m) << "shift " << shift;
    EXPECT_EQ(widened.v, rounded.v) << "shift " << shift;
  }
}

INSTANTIATE_TEST_SUITE_P(Sizes, AdamWBf16MomentsGpu,
                         ::testing::Values(Bf16MomentsCase{1, 1, true, true}, Bf16MomentsCase{1003, 517, true, true},
                                           Bf16MomentsCase{1003, 0, true, false},
                                           Bf16MomentsCase{1003, 1003, false, true},
                                           Bf16MomentsCase{(1 << 20) + 7, (1 << 19) + 3, true, true}));

// The optimizer tail of a training step, captured once and replayed: every replay must read the
// device-side step counter, and AdamW the constants and clip coefficient of its own step, exactly like
// the CPU reference run step by step.
TEST(OptimizerTailGraph, ReplaysMatchReferenceSteps) {
  const int64_t n = 100003, n_decay = 60001, replays = 4;
  const float max_norm = 1.0f;
  const kernels::AdamWHyperparams hyper{0.9f, 0.999f, 1e-8f};
  // Megatron's schedule from 0.01 to 0.5 over 3 steps: each replay decays by its own step's.
  const kernels::WeightDecayScheduleConfig decay{.start = 0.01,
                                                 .end = 0.5,
                                                 .incr_samples = 3,
                                                 .samples_per_step = 1,
                                                 .style = kernels::WeightDecayScheduleConfig::Style::cosine};
  kernels::LrScheduleConfig sched;
  sched.lr = 1e-3f;
  sched.min_lr = 1e-5f;
  sched.warmup_iters = 2;
  sched.decay_iters = 6;
  sched.style = kernels::LrScheduleConfig::Style::cosine;
  const std::vector<float> master0 = random_normal(n, 901, 0.05f);
  const std::vector<float> grads = random_normal(n, 902, 0.02f);  // norm ~6.3: clipping active

  DeviceBuffer<float> d_master(n), d_grads(n), d_m(n), d_v(n), d_lr(1), d_norm(1), d_clip(1), d_loss(1);
  DeviceBuffer<bf16> d_compute(n);
  DeviceBuffer<int64_t> d_step(1);
  DeviceBuffer<double> d_partials(kernels::kGradNormPartials);
  DeviceBuffer<int32_t> d_flag(1), d_loss_flag(1);
  DeviceBuffer<kernels::AdamWStepConstants> d_constants(1);
  d_master.upload(master0);
  d_grads.upload(grads);
  d_m.upload(std::vector<float>(n, 0.0f));
  d_v.upload(std::vector<float>(n, 0.0f));
  d_step.upload({0});
  d_flag.upload({0});
  d_loss.upload({2.5f});
  d_loss_flag.upload({0});
  d_compute.poison();
  cuda::Stream stream;

  cudaGraph_t graph = nullptr;
  SG_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  kernels::grad_norm_partials(stream, {.grads = d_grads.get(), .n = n, .partials = d_partials.get()});
  kernels::optimizer_step_scalars(stream, {.norm_partials = d_partials.get(),
                                           .max_norm = max_norm,
                                           .grad_norm = d_norm.get(),
                                           .clip_coefficient = d_clip.get(),
                                           .grad_nonfinite = d_flag.get(),
                                           .loss = d_loss.get(),
                                           .loss_nonfinite = d_loss_flag.get(),
                                           .schedule = sched,
                                           .weight_decay = decay,
                                           .adamw = hyper,
                                           .step_counter = d_step.get(),
                                           .lr = d_lr.get(),
                                           .adamw_constants = d_constants.get()});
  kernels::adamw_step(stream, {.master_weights = d_master.get(),
                               .compute_weights = d_compute.get(),
                               .grads = d_grads.get(),
                               .exp_avg = d_m.get(),
                               .exp_avg_sq = d_v.get(),
                               .n = n,
                               .n_decay = n_decay,
                               .step_constants = d_constants.get(),
                               .grad_scale = d_clip.get(),
                               .hyper = hyper});
  SG_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec = nullptr;
  SG_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  for (int64_t r = 0; r < replays; ++r) SG_CUDA_CHECK(cudaGraphLaunch(exec, stream));
  SG_CUDA_CHECK(cudaStreamSynchronize(stream));
  SG_CUDA_CHECK(cudaGraphExecDestroy(exec));
  SG_CUDA_CHECK(cudaGraphDestroy(graph));

  ref::LrSchedule ref_sched;
  ref_sched.lr = sched.lr;
  ref_sched.min_lr = sched.min_lr;
  ref_sched.warmup_iters = sched.warmup_iters;
  ref_sched.decay_iters = sched.decay_iters;
  ref_sched.style = ref::LrSchedule::Style::cosine;
  ref::AdamWConfig config{hyper.beta1, hyper.beta2, hyper.eps};
  const ref::WeightDecaySchedule ref_decay{.start = decay.start,
                                           .end = decay.end,
                                           .incr_samples = decay.incr_samples,
                                           .samples_per_step = decay.samples_per_step,
                                           .style = ref::WeightDecaySchedule::Style::cosine};
  std::vector<float> ref_p = master0, ref_m(n, 0.0f), ref_v(n, 0.0f);
  const double ref_norm = ref::grad_global_norm(grads.data(), n);
  const float ref_clip = ref::clip_coefficient(ref_norm, max_norm);
  ASSERT_LT(ref_clip, 1.0f) << "test setup: clipping should be active";
  float ref_lr = 0.0f;
  for (int64_t step = 0; step < replays; ++step) {
    ref_lr = ref::lr_at(ref_sched, step);
    config.weight_decay = ref::weight_decay_at(ref_decay, step);
    reference_update(ref_p, grads, ref_m, ref_v, n_decay, ref_lr, ref_clip, step + 1, config);
  }
  EXPECT_EQ(d_step.download()[0], replays);
  EXPECT_NEAR(d_lr.download()[0], ref_lr, 1e-6 * ref_lr);
  EXPECT_NEAR(d_norm.download()[0], ref_norm, 1e-6 * ref_norm);
  EXPECT_NEAR(d_clip.download()[0], ref_clip, 1e-6 * ref_clip);
  EXPECT_EQ(d_flag.download()[0], 0);
  EXPECT_EQ(d_loss_flag.download()[0], 0);
  const std::vector<float> master = d_master.download();
  EXPECT_LT(relative_error(master, ref_p), kFp32RelTol);
  EXPECT_LT(relative_error(d_m.download(), ref_m), kFp32RelTol);
  EXPECT_LT(relative_error(d_v.download(), ref_v), kFp32RelTol);
  expect_bf16_copy_of(d_compute.download(), master);
}

}  // namespace
