// GPU optimizer_step_scalars against reference/optimizer_step_scalars on the cases of
// optimizer_step_scalars_case.h (tolerances there: bitwise except the lr and AdamW's bias corrections, one
// fp32 ulp), every output poisoned first; its block sum of the partials (kernels/optimizer_step_scalars.cuh)
// bitwise that of cub::BlockReduce<double, 1024>, the grad-norm finalize this kernel replaced, and of the
// reference; a rerun and a CUDA-graph replay (its weight decay changing from step to step) bitwise identical.
#include <cub/block/block_reduce.cuh>
#include <gtest/gtest.h>

#include <bit>
#include <cstring>
#include <vector>

#include "cuda/stream.h"
#include "gpu_test_util.h"
#include "kernels/optimizer_step_scalars.cuh"
#include "kernels/optimizer_step_scalars_case.h"

namespace {

using namespace sg;
using namespace sg::test;

// The device buffers of every input and output of one launch.
struct DeviceStepScalars {
  DeviceBuffer<double> partials{kernels::kGradNormPartials};
  DeviceBuffer<float> grad_norm{1}, clip_coefficient{1}, loss{1}, lr{1};
  DeviceBuffer<int32_t> grad_nonfinite{1}, loss_nonfinite{1};
  DeviceBuffer<int64_t> step_counter{1};
  DeviceBuffer<kernels::AdamWStepConstants> adamw_constants{1};

  // Uploads the case's inputs and poisons every output.
  void set(const StepScalarsCase& c) {
    partials.upload(c.partials);
    loss.upload({c.loss});
    grad_nonfinite.upload({c.grad_nonfinite_before});
    loss_nonfinite.upload({c.loss_nonfinite_before});
    step_counter.upload({c.steps_done});
    grad_norm.poison();
    clip_coefficient.poison();
    lr.poison();
    adamw_constants.poison();
  }
  kernels::OptimizerStepScalarsParams params(const StepScalarsCase& c) const {
    return {.norm_partials = partials.get(),
            .max_norm = c.max_norm,
            .grad_norm = grad_norm.get(),
            .clip_coefficient = clip_coefficient.get(),
            .grad_nonfinite = grad_nonfinite.get(),
            .loss = loss.get(),
            .loss_nonfinite = loss_nonfinite.get(),
            .schedule = c.schedule,
            .weight_decay = c.weight_decay,
            .adamw = c.adamw,
            .step_counter = step_counter.get(),
            .lr = lr.get(),
            .adamw_constants = adamw_constants.get()};
  }
  StepScalarsResult download() const {
    return {.grad_norm = grad_norm.download()[0],
            .clip_coefficient = clip_coefficient.download()[0],
            .grad_nonfinite = grad_nonfinite.download()[0],
            .loss_nonfinite = loss_nonfinite.download()[0],
            .lr = lr.download()[0],
            .adamw = adamw_constants.download()[0],
            .step_counter = step_counter.download()[0]};
  }
};

StepScalarsResult run_on_gpu(DeviceStepScalars& d, const StepScalarsCase& c, cudaStream_t stream) {
  d.set(c);
  kernels::optimizer_step_scalars(stream, d.params(c));
  SG_CUDA_CHECK(cudaStreamSynchronize(stream));
  return d.download();
}

bool same_result(const StepScalarsResult& a, const StepScalarsResult& b) {
  return std::memcmp(&a, &b, sizeof(a)) == 0;
}

TEST(OptimizerStepScalarsGpu, NormClipAndFlagsMatchReference) {
  DeviceStepScalars d;
  sg::cuda::Stream stream;
  for (const StepScalarsCase& c : norm_cases()) {
    const StepScalarsResult r = run_on_gpu(d, c, stream);
    expect_matches_reference(c, r, Math::device);
    EXPECT_TRUE(same_result(r, run_on_gpu(d, c, stream))) << c.name << ": a rerun differs";
  }
}

TEST(OptimizerStepScalarsGpu, LrAndAdamWConstantsMatchReference) {
  DeviceStepScalars d;
  sg::cuda::Stream stream;
  for (const StepScalarsCase& c : schedule_cases()) expect_matches_reference(c, run_on_gpu(d, c, stream), Math::device);
}

TEST(OptimizerStepScalarsGpu, WeightDecayAndAdamWConstantsMatchReference) {
  DeviceStepScalars d;
  sg::cuda::Stream stream;
  for (const StepScalarsCase& c : weight_decay_cases()) {
    expect_matches_reference(c, run_on_gpu(d, c, stream), Math::device);
  }
}

// What grad_norm_finalize did before this kernel replaced it: cub's block sum of the 1024 partials.
__global__ void __launch_bounds__(kernels::kGradNormPartials)
    cub_block_sum_kernel(const double* __restrict__ partials, double* __restrict__ total) {
  using BlockReduce = cub::BlockReduce<double, kernels::kGradNormPartials>;
  __shared__ typename BlockReduce::TempStorage storage;
  const double sum = BlockReduce(storage).Sum(partials[threadIdx.x]);
  if (threadIdx.x == 0) *total = sum;
}

// The fused kernel's block sum alone (its fp64 total, which the fp32 norm mostly rounds away).
__global__ void __launch_bounds__(kernels::kGradNormPartials)
    fused_block_sum_kernel(const double* __restrict__ partials, double* __restrict__ total) {
  __shared__ double warp_sums[kernels::optimizer_scalars::kWarps];
  const double sum = kernels::optimizer_scalars::block_sum_partials(partials[threadIdx.x], warp_sums);
  if (threadIdx.x == 0) *total = sum;
}

TEST(OptimizerStepScalarsGpu, BlockSumIsBitwiseTheCubBlockSum) {
  DeviceStepScalars d;
  DeviceBuffer<double> cub_total(1), fused_total(1);
  sg::cuda::Stream stream;
  for (uint64_t seed = 10; seed < 20; ++seed) {
    StepScalarsCase c = schedule_cases().front();
    c.partials = wide_partials(seed);
    const StepScalarsResult r = run_on_gpu(d, c, stream);
    cub_total.poison();
    fused_total.poison();
    cub_block_sum_kernel<<<1, kernels::kGradNormPartials, 0, stream>>>(d.partials.get(), cub_total.get());
    SG_CUDA_CHECK(cudaGetLastError());
    fused_block_sum_kernel<<<1, kernels::kGradNormPartials, 0, stream>>>(d.partials.get(), fused_total.get());
    SG_CUDA_CHECK(cudaGetLastError());
    SG_CUDA_CHECK(cudaStreamSynchronize(stream));
    const double total = cub_total.download()[0];
    EXPECT_EQ(std::bit_cast<uint64_t>(fused_total.download()[0]), std::bit_cast<uint64_t>(total))
        << "seed " << seed << ": the fused kernel does not add in cub's order";
    EXPECT_EQ(std::bit_cast<uint64_t>(ref::sum_norm_partials(c.partials.data(), kernels::kGradNormPartials)),
              std::bit_cast<uint64_t>(total))
        << "seed " << seed << ": the reference does not add in cub's order";
    EXPECT_TRUE(same_bits(r.grad_norm, static_cast<float>(std::sqrt(total)))) << "seed " << seed;
  }
}

// The RNG states: the first `count` advance by the given amount on every launch (replays included), the
// next one is untouched.
TEST(OptimizerStepScalarsGpu, AdvancesTheRngStates) {
  DeviceStepScalars d;
  const StepScalarsCase c = schedule_cases().front();
  d.set(c);
  constexpr int64_t kCount = 5;
  std::vector<rng::RngState> init(kCount + 1);
  for (size_t i = 0; i < init.size(); ++i) init[i] = {.seed = 77 + i, .offset = (uint64_t{1} << 33) + 3 * i};
  DeviceBuffer<rng::RngState> states(init.size());
  states.upload(init);
  kernels::OptimizerStepScalarsParams p = d.params(c);
  p.rng_states = states.get();
  p.rng_count = kCount;
  p.rng_advance_by = 2;
  sg::cuda::Stream stream;
  cudaGraph_t graph = nullptr;
  SG_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  kernels::optimizer_step_scalars(stream, p);
  SG_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec = nullptr;
  SG_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  kernels::optimizer_step_scalars(stream, p);  // eager, then two replays: three advances
  for (int i = 0; i < 2; ++i) SG_CUDA_CHECK(cudaGraphLaunch(exec, stream));
  SG_CUDA_CHECK(cudaStreamSynchronize(stream));
  const std::vector<rng::RngState> got = states.download();
  for (size_t i = 0; i < init.size(); ++i) {
    EXPECT_EQ(got[i].seed, init[i].seed) << i;
    EXPECT_EQ(got[i].offset, init[i].offset + (static_cast<int64_t>(i) < kCount ? 6u : 0u)) << i;
  }
  SG_CUDA_CHECK(cudaGraphExecDestroy(exec));
  SG_CUDA_CHECK(cudaGraphDestroy(graph));
}

// Captured once and replayed: every replay reads the counter the previous one advanced.
TEST(OptimizerStepScalarsGpu, GraphReplaysAdvanceTheCounter) {
  DeviceStepScalars d;
  StepScalarsCase c = schedule_cases().front();
  c.schedule = {.lr = 1e-3f, .min_lr = 1e-5f, .warmup_iters = 2, .decay_iters = 6,
                .style = kernels::LrScheduleConfig::Style::cosine};
  c.weight_decay = {.start = 0.01,
                    .end = 0.1,
                    .incr_samples = 6 * 4,
                    .samples_per_step = 4,
                    .style = kernels::WeightDecayScheduleConfig::Style::linear};
  d.set(c);
  sg::cuda::Stream stream;
  cudaGraph_t graph = nullptr;
  SG_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  kernels::optimizer_step_scalars(stream, d.params(c));
  SG_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec = nullptr;
  SG_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  DeviceStepScalars eager;
  for (int64_t step = 0; step < 8; ++step) {
    SG_CUDA_CHECK(cudaGraphLaunch(exec, stream));
    SG_CUDA_CHECK(cudaStreamSynchronize(stream));
    StepScalarsCase at = c;
    at.steps_done = step;
    const StepScalarsResult replayed = d.download();
    EXPECT_TRUE(same_result(replayed, run_on_gpu(eager, at, stream))) << "replay " << step << " differs from eager";
    expect_matches_reference(at, replayed, Math::device);
  }
  SG_CUDA_CHECK(cudaGraphExecDestroy(exec));
  SG_CUDA_CHECK(cudaGraphDestroy(graph));
}

}  // namespace
