// GPU embedding forward/backward against reference/embedding.
// Forward: a bf16 gather, so the output must be bitwise the table rows (NaN rows for tokens outside
// [0, V)). Backward: fp32 dtable from identical bf16 dout, summed in a different (but fixed) order than
// the reference's sequential adds: relative error < kFp32RelTol (1e-5); rows of tokens that do not occur
// are bitwise unchanged. Heavily repeated tokens; two runs bitwise equal; captured into a CUDA graph and
// replayed (also on new tokens written into the same device buffer) it gives the eager bits.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "core/strings.h"
#include "cuda/stream.h"
#include "gpu_test_util.h"
#include "kernels/embedding.h"
#include "reference/embedding.h"

namespace {

using namespace sg;
using namespace sg::test;

void sync() { SG_CUDA_CHECK(cudaDeviceSynchronize()); }

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

struct Shape {
  int64_t T, H, V;
};
// Small vocabularies relative to T give long runs of one token (1000 tokens over V = 7).
const Shape kShapes[] = {{1, 64, 5},        {7, 100, 3},         {257, 256, 1000}, {1000, 768, 7},
                         {64, 2056, 17},    {8192, 2048, 32000}, {513, 72, 128256}};

// Tokens with heavy repetition: a third of them are token 0, the rest uniform.
std::vector<int32_t> skewed_tokens(int64_t T, int64_t V, uint64_t seed) {
  auto tokens = random_tokens(T, static_cast<int32_t>(V), seed);
  for (int64_t t = 0; t < T; t += 3) tokens[t] = 0;
  return tokens;
}

class EmbeddingGpu : public ::testing::TestWithParam<Shape> {};

TEST_P(EmbeddingGpu, ForwardGathersRowsExactly) {
  const auto [T, H, V] = GetParam();
  const auto tokens = skewed_tokens(T, V, 10 + T);
  const auto table = round_bf16(random_normal(V * H, 20 + H));
  std::vector<float> out_ref(T * H);
  ref::embedding_forward(out_ref.data(), tokens.data(), table.data(), T, H);

  DeviceBuffer<int32_t> d_tokens(T);
  DeviceBuffer<bf16> d_table(V * H), d_out(T * H);
  d_tokens.upload(tokens);
  d_table.upload(to_bf16(table));
  d_out.poison();
  sync();
  cuda::Stream stream;
  kernels::embedding_forward(
      stream, {.out = d_out.get(), .tokens = d_tokens.get(), .table = d_table.get(), .T = T, .H = H, .vocab_size = V});
  sync();
  EXPECT_TRUE(same_bits(d_out.download(), to_bf16(out_ref))) << "T=" << T << " H=" << H << " V=" << V;
}

TEST_P(EmbeddingGpu, BackwardMatchesReferenceAndIsDeterministic) {
  const auto [T, H, V] = GetParam();
  const auto tokens = skewed_tokens(T, V, 30 + T);
  const auto dout = round_bf16(random_normal(T * H, 40 + H));
  const auto dtable0 = random_normal(V * H, 50 + V, 0.1f);  // the backward ADDS into this
  auto dtable_ref = dtable0;
  ref::embedding_backward(dtable_ref.data(), dout.data(), tokens.data(), T, H);

  DeviceBuffer<int32_t> d_tokens(T);
  DeviceBuffer<bf16> d_dout(T * H);
  DeviceBuffer<float> d_dtable(V * H);
  const size_t scratch_bytes = kernels::embedding_backward_scratch_bytes(T, V);
  DeviceBuffer<char> d_scratch(scratch_bytes);
  d_tokens.upload(tokens);
  d_dout.upload(to_bf16(dout));
  cuda::Stream stream;
  auto run = [&] {
    d_dtable.upload(dtable0);
    d_scratch.poison();
    sync();
    kernels::embedding_backward(stream, {.dtable = d_dtable.get(),
                                         .dout = d_dout.get(),
                                         .tokens = d_tokens.get(),
                                         .scratch = d_scratch.get(),
                                         .scratch_bytes = scratch_bytes,
                                         .T = T,
                                         .H = H,
                                         .vocab_size = V});
    sync();
    return d_dtable.download();
  };
  const auto dtable = run();
  EXPECT_LT(relative_error(dtable, dtable_ref), kFp32RelTol) << "T=" << T << " H=" << H << " V=" << V;
  std::vector<bool> seen(V, false);
  for (int32_t tok : tokens) seen[tok] = true;
  for (int64_t v = 0; v < V; ++v) {
    if (!seen[v]) {
      ASSERT_EQ(std::memcmp(dtable.data() + v * H, dtable0.data() + v * H, H * sizeof(float)), 0)
          << "row " << v << " has no token but changed";
    }
  }
  EXPECT_TRUE(same_bits(run(), dtable)) << "second run differs";
}

// Into a bf16 main gradient (ddp.grad_reduce_in_fp32=false): each row's fp32 sum is added to the widened row and
// rounded once, so the result is bit for bit the fp32 kernel's on the rounded table, rounded; rows without a
// token keep their bits.
TEST_P(EmbeddingGpu, BackwardIntoBf16IsTheFp32SumRoundedOnce) {
  const auto [T, H, V] = GetParam();
  const auto tokens = skewed_tokens(T, V, 31 + T);
  const auto dout = round_bf16(random_normal(T * H, 41 + H));
  const auto dtable0 = round_bf16(random_normal(V * H, 51 + V, 0.1f));
  DeviceBuffer<int32_t> d_tokens(T);
  DeviceBuffer<bf16> d_dout(T * H), d_bf16(V * H);
  DeviceBuffer<float> d_fp32(V * H);
  const size_t scratch_bytes = kernels::embedding_backward_scratch_bytes(T, V);
  DeviceBuffer<char> d_scratch(scratch_bytes);
  d_tokens.upload(tokens);
  d_dout.upload(to_bf16(dout));
  d_fp32.upload(dtable0);
  d_bf16.upload(to_bf16(dtable0));
  d_scratch.poison();
  sync();
  cuda::Stream stream;
  kernels::embedding_backward(stream, {.dtable = d_fp32.get(),
                                       .dout = d_dout.get(),
                                       .tokens = d_tokens.get(),
                                       .scratch = d_scratch.get(),
                                       .scratch_bytes = scratch_bytes,
                                       .T = T,
                                       .H = H,
                                       .vocab_size = V});
  kernels::embedding_backward(stream, {.dtable = d_bf16.get(),
                                       .dout = d_dout.get(),
                                       .tokens = d_tokens.get(),
                                       .scratch = d_scratch.get(),
                                       .scratch_bytes = scratch_bytes,
                                       .T = T,
                                       .H = H,
                                       .vocab_size = V});
  sync();
  EXPECT_TRUE(same_bits(to_float(d_bf16.download()), round_bf16(d_fp32.download())))
      << "T=" << T << " H=" << H << " V=" << V;
}

INSTANTIATE_TEST_SUITE_P(Shapes, EmbeddingGpu, ::testing::ValuesIn(kShapes), [](const auto& info) {
  return strprintf("T%lld_H%lld_V%lld", static_cast<long long>(info.param.T), static_cast<long long>(info.param.H),
                   static_cast<long long>(info.param.V));
});

TEST(EmbeddingGpuMisc, OutOfRangeTokensGiveNanRowsAndNoGradient) {
  const int64_t T = 6, H = 24, V = 10;
  const std::vector<int32_t> tokens = {3, -1, 10, 3, INT32_MAX, 9};
  const auto table = round_bf16(random_normal(V * H, 60));
  const auto dout = round_bf16(random_normal(T * H, 61));
  DeviceBuffer<int32_t> d_tokens(T);
  DeviceBuffer<bf16> d_table(V * H), d_out(T * H), d_dout(T * H);
  DeviceBuffer<float> d_dtable(V * H);
  const size_t scratch_bytes = kernels::embedding_backward_scratch_bytes(T, V);
  DeviceBuffer<char> d_scratch(scratch_bytes);
  d_tokens.upload(tokens);
  d_table.upload(to_bf16(table));
  d_dout.upload(to_bf16(dout));
  d_dtable.upload(std::vector<float>(V * H, 0.0f));
  d_out.poison();
  sync();
  cuda::Stream stream;
  kernels::embedding_forward(
      stream, {.out = d_out.get(), .tokens = d_tokens.get(), .table = d_table.get(), .T = T, .H = H, .vocab_size = V});
  kernels::embedding_backward(stream, {.dtable = d_dtable.get(),
                                       .dout = d_dout.get(),
                                       .tokens = d_tokens.get(),
                                       .scratch = d_scratch.get(),
                                       .scratch_bytes = scratch_bytes,
                                       .T = T,
                                       .H = H,
                                       .vocab_size = V});
  sync();
  const auto out = to_float(d_out.download());
  for (int64_t t = 0; t < T; ++t) {
    const bool valid = tokens[t] >= 0 && tokens[t] < V;
    for (int64_t h = 0; h < H; ++h) {
      if (valid) {
        ASSERT_EQ(out[t * H + h], table[tokens[t] * H + h]);
      } else {
        ASSERT_TRUE(std::isnan(out[t * H + h])) << "token " << tokens[t];
      }
    }
  }
  // Only the valid tokens (rows 0, 3, 5 of dout) reach the table.
  std::vector<float> dtable_ref(V * H, 0.0f);
  const std::vector<int32_t> valid_tokens = {3, 3, 9};
  std::vector<float> valid_dout;
  for (int64_t t : {0, 3, 5}) valid_dout.insert(valid_dout.end(), dout.begin() + t * H, dout.begin() + (t + 1) * H);
  ref::embedding_backward(dtable_ref.data(), valid_dout.data(), valid_tokens.data(), 3, H);
  EXPECT_LT(relative_error(d_dtable.download(), dtable_ref), kFp32RelTol);
}

// The backward (prepare kernel, CUB radix sort, run sums) captured into a graph: replays give the eager
// bits, and a replay after new tokens are copied into the same device buffer follows the new tokens.
TEST(EmbeddingGpuMisc, BackwardIsGraphCapturable) {
  const int64_t T = 1000, H = 256, V = 300;
  const auto tokens_a = skewed_tokens(T, V, 70);
  const auto tokens_b = skewed_tokens(T, V, 71);
  const auto dout = round_bf16(random_normal(T * H, 72));
  DeviceBuffer<int32_t> d_tokens(T);
  DeviceBuffer<bf16> d_dout(T * H);
  DeviceBuffer<float> d_dtable(V * H);
  const size_t scratch_bytes = kernels::embedding_backward_scratch_bytes(T, V);
  DeviceBuffer<char> d_scratch(scratch_bytes);
  d_dout.upload(to_bf16(dout));
  const std::vector<float> zeros(V * H, 0.0f);
  cuda::Stream stream;
  const kernels::EmbeddingBackwardParams params{.dtable = d_dtable.get(),
                                                .dout = d_dout.get(),
                                                .tokens = d_tokens.get(),
                                                .scratch = d_scratch.get(),
                                                .scratch_bytes = scratch_bytes,
                                                .T = T,
                                                .H = H,
                                                .vocab_size = V};
  auto eager = [&](const std::vector<int32_t>& tokens) {
    d_tokens.upload(tokens);
    d_dtable.upload(zeros);
    sync();
    kernels::embedding_backward(stream, params);
    sync();
    return d_dtable.download();
  };
  const auto want_a = eager(tokens_a);
  const auto want_b = eager(tokens_b);
  ASSERT_FALSE(same_bits(want_a, want_b));

  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  SG_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  kernels::embedding_backward(stream, params);
  SG_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  SG_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  auto replay = [&](const std::vector<int32_t>& tokens) {
    d_tokens.upload(tokens);
    d_dtable.upload(zeros);
    d_scratch.poison();
    sync();
    SG_CUDA_CHECK(cudaGraphLaunch(exec, stream));
    sync();
    return d_dtable.download();
  };
  EXPECT_TRUE(same_bits(replay(tokens_a), want_a));
  EXPECT_TRUE(same_bits(replay(tokens_b), want_b));
  EXPECT_TRUE(same_bits(replay(tokens_a), want_a));
  SG_CUDA_CHECK(cudaGraphExecDestroy(exec));
  SG_CUDA_CHECK(cudaGraphDestroy(graph));
}

TEST(EmbeddingGpuMisc, BackwardRejectsSmallScratch) {
  const int64_t T = 100, H = 64, V = 50;
  DeviceBuffer<int32_t> d_tokens(T);
  DeviceBuffer<bf16> d_dout(T * H);
  DeviceBuffer<float> d_dtable(V * H);
  const size_t too_small = 1024;  // not even the four [T] int32 sort arrays (4 x 512 bytes) fit
  DeviceBuffer<char> d_scratch(too_small);
  cuda::Stream stream;
  EXPECT_THROW(kernels::embedding_backward(stream, {.dtable = d_dtable.get(),
                                                    .dout = d_dout.get(),
                                                    .tokens = d_tokens.get(),
                                                    .scratch = d_scratch.get(),
                                                    .scratch_bytes = too_small,
                                                    .T = T,
                                                    .H = H,
                                                    .vocab_size = V}),
               Error);
}

}  // namespace
