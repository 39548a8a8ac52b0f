// GPU generation-step bookkeeping (kernels/decode_state.h) against reference/decode_state over several
// steps, including a step past the history's end and more sequences than one block has threads.
#include <gtest/gtest.h>

#include <vector>

#include "cuda/stream.h"
#include "gpu_test_util.h"
#include "kernels/decode_state.h"
#include "reference/decode_state.h"

namespace {

using namespace sg;
using namespace sg::test;

TEST(DecodeStateGpu, MatchesReferenceOverSteps) {
  for (const int64_t B : {1, 5, 700}) {
    const int64_t stride = 3;
    std::vector<int32_t> history(B * stride, -7), positions(B);
    for (int64_t b = 0; b < B; ++b) positions[b] = static_cast<int32_t>(b % 13);
    int64_t step = 0;
    DeviceBuffer<int32_t> d_history(B * stride), d_positions(B), d_tokens(B);
    DeviceBuffer<int64_t> d_step(1);
    d_history.upload(history);
    d_positions.upload(positions);
    d_step.upload({0});
    cuda::Stream stream;
    for (int s = 0; s < 4; ++s) {  // the 4th step is past the history
      const auto tokens = random_tokens(B, 1000, 30 + s);
      d_tokens.upload(tokens);
      ref::decode_advance(history.data(), stride, tokens.data(), positions.data(), &step, B);
      kernels::decode_advance(stream, {.history = d_history.get(),
                                       .history_stride = stride,
                                       .tokens = d_tokens.get(),
                                       .positions = d_positions.get(),
                                       .step = d_step.get(),
                                       .B = B});
      SG_CUDA_CHECK(cudaDeviceSynchronize());
    }
    EXPECT_EQ(d_history.download(), history) << "B=" << B;
    EXPECT_EQ(d_positions.download(), positions) << "B=" << B;
    EXPECT_EQ(d_step.download(), std::vector<int64_t>{step}) << "B=" << B;
  }
}

}  // namespace
