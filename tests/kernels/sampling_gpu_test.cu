// GPU token choice (kernels/sampling.h) against reference/sampling:
//   greedy: exactly the reference's token for random rows, rows with ties and NaNs, V from 1 to 128256;
//   sampling (temperature, top-k, top-p and their mixes): the GPU sums weights in fp32 in a fixed
//   tile order, the reference in fp64, so they may disagree only when the draw falls within rounding of
//   a boundary between two neighbouring tokens: every disagreement must be such a neighbour (adjacent
//   in the descending order) and they must be rare (< 1% of rows);
//   the Philox offset is read from device memory (another step draws differently) and a captured
//   graph replays the eager result bitwise; a too small scratch is refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <vector>

#include "core/strings.h"
#include "cuda/arena.h"
#include "cuda/stream.h"
#include "gpu_test_util.h"
#include "kernels/sampling.h"
#include "reference/sampling.h"

namespace {

using namespace sg;
using namespace sg::test;

void sync() {
  SG_CUDA_CHECK(cudaDeviceSynchronize());
}
int64_t padded(int64_t V) {
  return (V + 7) / 8 * 8;
}

// Rows [B, ld] of random logits (spread `scale`), padding columns NaN (must never be read).
std::vector<float> random_logits(int64_t B, int64_t V, int64_t ld, uint64_t seed, float scale) {
  const auto values = random_normal(B * V, seed, scale);
  std::vector<float> out(B * ld, std::numeric_limits<float>::quiet_NaN());
  for (int64_t b = 0; b < B; ++b) std::copy_n(values.begin() + b * V, V, out.begin() + b * ld);
  return out;
}

std::vector<int32_t> gpu_sample(const std::vector<float>& logits, int64_t B, int64_t V, int64_t ld,
                                const ref::SamplingConfig& config, int64_t step) {
  DeviceBuffer<float> d_logits(B * ld);
  DeviceBuffer<int32_t> d_tokens(B);
  DeviceBuffer<int64_t> d_step(1);
  const size_t bytes = kernels::sample_tokens_scratch_bytes(B, V, ld, config);
  void* scratch = bytes > 0 ? cuda::device_allocate(bytes, "sampling test scratch") : nullptr;
  d_logits.upload(logits);
  d_step.upload({step});
  d_tokens.poison();
  cuda::Stream stream;
  kernels::sample_tokens(stream, {.tokens = d_tokens.get(),
                                  .logits = d_logits.get(),
                                  .B = B,
                                  .V = V,
                                  .ld = ld,
                                  .config = config,
                                  .step = d_step.get(),
                                  .scratch = scratch,
                                  .scratch_bytes = bytes});
  sync();
  cuda::device_free(scratch, "sampling test scratch");
  return d_tokens.download();
}

ref::SamplingConfig cfg(float temperature, int64_t top_k, float top_p, uint64_t seed) {
  return {.temperature = temperature, .top_k = top_k, .top_p = top_p, .seed = seed};
}

TEST(SamplingGpu, GreedyEqualsReferenceExactly) {
  for (const int64_t V : {1, 7, 1000, 32000, 128256}) {
    for (const int64_t B : {1, 3, 8}) {
      const int64_t ld = padded(V);
      auto logits = random_logits(B, V, ld, 10 + V + B, 3.0f);
      if (V >= 7) {  // row 0: a tie between two far apart ids, and a NaN larger "value" ignored
        logits[5] = logits[V - 1] = 100.0f;
        logits[1] = std::numeric_limits<float>::quiet_NaN();
      }
      std::vector<int32_t> want(B);
      ref::sample_tokens(want.data(), logits.data(), B, V, ld, cfg(0.0f, 0, 1.0f, 0), 0);
      EXPECT_EQ(gpu_sample(logits, B, V, ld, cfg(0.0f, 0, 1.0f, 0), 0), want) << "V=" << V << " B=" << B;
      if (V >= 7) EXPECT_EQ(want[0], 5);
    }
  }
}

// Rank of each token in the row's descending (stable) order.
std::vector<int64_t> ranks(const float* row, int64_t V) {
  std::vector<int32_t> order(V);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return row[a] > row[b]; });
  std::vector<int64_t> rank(V);
  for (int64_t r = 0; r < V; ++r) rank[order[r]] = r;
  return rank;
}

struct Case {
  int64_t V, B;
  float temperature;
  int64_t top_k;
  float top_p;
  float spread;
};
const Case kCases[] = {{50, 512, 1.0f, 0, 1.0f, 2.0f},   {1000, 256, 0.7f, 50, 1.0f, 3.0f},
                       {32000, 64, 1.3f, 0, 0.9f, 4.0f}, {128256, 16, 1.0f, 1000, 0.5f, 5.0f},
                       {128256, 8, 1.0f, 0, 1.0f, 8.0f}, {300, 256, 0.05f, 0, 0.95f, 1.0f},
                       {9, 512, 2.0f, 3, 0.8f, 1.0f},    {1, 4, 1.0f, 0, 0.3f, 1.0f}};

class SamplingGpuCases : public ::testing::TestWithParam<Case> {};

TEST_P(SamplingGpuCases, AgreesWithReferenceUpToRoundingNeighbours) {
  const Case c = GetParam();
  const int64_t ld = padded(c.V);
  const auto logits = random_logits(c.B, c.V, ld, 77 + c.V, c.spread);
  const auto config = cfg(c.temperature, c.top_k, c.top_p, 4242);
  std::vector<int32_t> want(c.B);
  ref::sample_tokens(want.data(), logits.data(), c.B, c.V, ld, config, 5);
  const auto got = gpu_sample(logits, c.B, c.V, ld, config, 5);
  int64_t differ = 0;
  for (int64_t b = 0; b < c.B; ++b) {
    ASSERT_GE(got[b], 0);
    ASSERT_LT(got[b], c.V);
    if (got[b] == want[b]) continue;
    ++differ;
    const auto rank = ranks(logits.data() + b * ld, c.V);
    EXPECT_EQ(std::llabs(rank[got[b]] - rank[want[b]]), 1)
        << "row " << b << ": GPU " << got[b] << ", reference " << want[b];
  }
  EXPECT_LE(differ, c.B / 100) << differ << " of " << c.B << " rows differ";
  // Another step (the Philox offset read from device memory) draws differently.
  if (c.V > 1 && c.top_k != 1) EXPECT_NE(gpu_sample(logits, c.B, c.V, ld, config, 6), got);
}

INSTANTIATE_TEST_SUITE_P(Cases, SamplingGpuCases, ::testing::ValuesIn(kCases), [](const auto& info) {
  const Case& c = info.param;
  return strprintf("V%lld_B%lld_k%lld_case%zu", static_cast<long long>(c.V), static_cast<long long>(c.B),
                   static_cast<long long>(c.top_k), info.index);
});

TEST(SamplingGpu, CapturedGraphReplaysEagerBitwise) {
  const int64_t B = 4, V = 5000, ld = padded(V);
  const auto config = cfg(0.9f, 100, 0.9f, 9);
  const auto logits = random_logits(B, V, ld, 3, 3.0f);
  DeviceBuffer<float> d_logits(B * ld);
  DeviceBuffer<int32_t> d_tokens(B);
  DeviceBuffer<int64_t> d_step(1);
  const size_t bytes = kernels::sample_tokens_scratch_bytes(B, V, ld, config);
  void* scratch = cuda::device_allocate(bytes, "sampling test scratch");
  d_logits.upload(logits);
  cuda::Stream stream;
  const kernels::SampleTokensParams p{.tokens = d_tokens.get(),
                                      .logits = d_logits.get(),
                                      .B = B,
                                      .V = V,
                                      .ld = ld,
                                      .config = config,
                                      .step = d_step.get(),
                                      .scratch = scratch,
                                      .scratch_bytes = bytes};
  std::vector<std::vector<int32_t>> eager;
  for (int64_t step = 0; step < 3; ++step) {
    d_step.upload({step});
    kernels::sample_tokens(stream, p);
    sync();
    eager.push_back(d_tokens.download());
  }
  cudaGraph_t graph;
  SG_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  kernels::sample_tokens(stream, p);
  SG_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec;
  SG_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  for (int64_t step = 0; step < 3; ++step) {
    d_step.upload({step});
    d_tokens.poison();
    SG_CUDA_CHECK(cudaGraphLaunch(exec, stream));
    sync();
    EXPECT_EQ(d_tokens.download(), eager[step]) << "step " << step;
  }
  SG_CUDA_CHECK(cudaGraphExecDestroy(exec));
  SG_CUDA_CHECK(cudaGraphDestroy(graph));
  // A scratch smaller than planned is refused.
  auto small = p;
  small.scratch_bytes = 256;
  EXPECT_THROW(kernels::sample_tokens(stream, small), Error);
  cuda::device_free(scratch, "sampling test scratch");
}

}  // namespace
