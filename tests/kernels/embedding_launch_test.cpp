// The split embedding backward's launchers (kernels/embedding.h) check their params on the host before
// any CUDA call, so these run without a GPU: errors name the launcher, the bad value and the planner
// (embedding_backward_scratch_bytes), and T = 0 is a no-op that needs no scratch. The kernels themselves
// (a CUB sort, so no emulated twin) are compared with reference/embedding in
// tests/kernels/embedding_gpu_test.cu.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "core/error.h"
#include "kernels/embedding.h"
#include "test_util.h"

namespace sg {
namespace {

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// Host-side stand-ins: the checks read the pointers' values only, never what they point to.
alignas(256) unsigned char fake_scratch[4096];
const auto* const fake_tokens = reinterpret_cast<const int32_t*>(fake_scratch);
auto* const fake_dtable = reinterpret_cast<float*>(fake_scratch);
const auto* const fake_dout = reinterpret_cast<const bf16*>(fake_scratch);

kernels::EmbeddingBackwardPrepareParams prepare_params(void* scratch, size_t bytes, int64_t T, int64_t V) {
  return {.tokens = fake_tokens, .scratch = scratch, .scratch_bytes = bytes, .T = T, .vocab_size = V};
}
kernels::EmbeddingBackwardRunsParams runs_params(const void* scratch, size_t bytes, int64_t T, int64_t H, int64_t V) {
  return {.dtable = fake_dtable,
          .dout = fake_dout,
          .scratch = scratch,
          .scratch_bytes = bytes,
          .T = T,
          .H = H,
          .vocab_size = V};
}

TEST(EmbeddingLaunch, ZeroTokensNeedNoScratchAndLaunchNothing) {
  EXPECT_NO_THROW(kernels::embedding_backward_prepare(nullptr, prepare_params(nullptr, 0, 0, 7)));
  EXPECT_NO_THROW(kernels::embedding_backward_runs(nullptr, runs_params(nullptr, 0, 0, 64, 7)));
}

TEST(EmbeddingLaunch, SmallOrMisalignedScratchNamesTheLauncherAndThePlanner) {
  // T = 100: the four [T] int32 sort arrays alone take 4 x 512 bytes; 1024 bytes cannot hold them.
  const std::string prepare_small = test::thrown_message(
      [] { kernels::embedding_backward_prepare(nullptr, prepare_params(fake_scratch, 1024, 100, 50)); });
  EXPECT_TRUE(contains(prepare_small, "embedding_backward_prepare")) << prepare_small;
  EXPECT_TRUE(contains(prepare_small, "embedding_backward_scratch_bytes(T=100, vocab_size=50)")) << prepare_small;
  EXPECT_TRUE(contains(prepare_small, "1024 bytes")) << prepare_small;

  const std::string runs_small = test::thrown_message(
      [] { kernels::embedding_backward_runs(nullptr, runs_params(fake_scratch, 1024, 100, 64, 50)); });
  EXPECT_TRUE(contains(runs_small, "embedding_backward_runs")) << runs_small;
  EXPECT_TRUE(contains(runs_small, "embedding_backward_scratch_bytes(T=100, vocab_size=50)")) << runs_small;

  const std::string misaligned = test::thrown_message(
      [] { kernels::embedding_backward_runs(nullptr, runs_params(fake_scratch + 4, 4000, 8, 64, 50)); });
  EXPECT_TRUE(contains(misaligned, "256-byte aligned")) << misaligned;
  EXPECT_THROW(kernels::embedding_backward_prepare(nullptr, prepare_params(nullptr, 4096, 8, 50)), Error);
}

TEST(EmbeddingLaunch, BadShapesAndNullPointersNameTheLauncher) {
  const std::string vocab = test::thrown_message(
      [] { kernels::embedding_backward_prepare(nullptr, prepare_params(fake_scratch, 4096, 8, 0)); });
  EXPECT_TRUE(contains(vocab, "embedding_backward_prepare: vocab_size = 0")) << vocab;
  const std::string width = test::thrown_message(
      [] { kernels::embedding_backward_runs(nullptr, runs_params(fake_scratch, 4096, 8, 0, 50)); });
  EXPECT_TRUE(contains(width, "embedding_backward_runs: H = 0")) << width;
  kernels::EmbeddingBackwardPrepareParams no_tokens = prepare_params(fake_scratch, 4096, 8, 50);
  no_tokens.tokens = nullptr;
  EXPECT_TRUE(contains(test::thrown_message([&] { kernels::embedding_backward_prepare(nullptr, no_tokens); }),
                       "embedding_backward_prepare: tokens is null"));
  kernels::EmbeddingBackwardRunsParams no_dout = runs_params(fake_scratch, 4096, 8, 64, 50);
  no_dout.dout = nullptr;
  EXPECT_TRUE(contains(test::thrown_message([&] { kernels::embedding_backward_runs(nullptr, no_dout); }),
                       "embedding_backward_runs: null pointer"));
}

}  // namespace
}  // namespace sg
