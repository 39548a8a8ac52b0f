// model/attention_dropout_seeds.h's kernel on the GPU: every slot gets attention_dropout_seed(state.seed,
// sites[i], state.offset) and attention_dropout_offset(state.offset) (model/dropout_sites.h, checked on the CPU in
// attention_dropout_seed_test.cpp), read from the device RngState at run time — so a replayed graph
// follows the state's offset — for counts across several blocks; a slot past count is not written.
// Filter: --gtest_filter='AttentionDropoutSeedsGpu*'
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "cuda/check.h"
#include "cuda/device.h"
#include "cuda/stream.h"
#include "gpu_test_util.h"
#include "model/attention_dropout_seeds.h"
#include "model/dropout_sites.h"

namespace sg::model {
namespace {

class AttentionDropoutSeedsGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (cuda::device_count() == 0) GTEST_SKIP() << "no GPU";
  }
};

TEST_F(AttentionDropoutSeedsGpu, EverySlotGetsTheHostFormula) {
  for (const int count : {1, 5, 128, 129, 300}) {
    SCOPED_TRACE(count);
    std::vector<uint32_t> sites(static_cast<size_t>(count));
    for (int i = 0; i < count; ++i) sites[static_cast<size_t>(i)] = static_cast<uint32_t>(3 * i + (i % 2));
    const rng::RngState state{0x8000000000001234ull, 0x1'0000'0005ull};  // high bits in both
    test::DeviceBuffer<rng::RngState> d_state(1);
    test::DeviceBuffer<uint32_t> d_sites(sites.size());
    test::DeviceBuffer<int64_t> d_seeds(sites.size() + 1), d_offsets(sites.size() + 1);
    d_state.upload({state});
    d_sites.upload(sites);
    d_seeds.poison();
    d_offsets.poison();
    cuda::Stream stream;
    write_attention_dropout_seeds(stream, {.state = d_state.get(),
                                           .sites = d_sites.get(),
                                           .seeds = d_seeds.get(),
                                           .offsets = d_offsets.get(),
                                           .count = count});
    stream.synchronize();
    const std::vector<int64_t> seeds = d_seeds.download(), offsets = d_offsets.download();
    for (int i = 0; i < count; ++i) {
      const size_t s = static_cast<size_t>(i);
      EXPECT_EQ(seeds[s], attention_dropout_seed(state.seed, sites[s], state.offset)) << "slot " << i;
      EXPECT_EQ(offsets[s], attention_dropout_offset(state.offset)) << "slot " << i;
    }
    EXPECT_EQ(seeds[sites.size()], int64_t{-1}) << "a slot past count was written";
    EXPECT_EQ(offsets[sites.size()], int64_t{-1}) << "a slot past count was written";
  }
}

// Captured once, replayed after the state's offset moved on: the replay writes the new offset.
TEST_F(AttentionDropoutSeedsGpu, AReplayReadsTheCurrentState) {
  const std::vector<uint32_t> sites = {0, 3, 6};
  test::DeviceBuffer<rng::RngState> d_state(1);
  test::DeviceBuffer<uint32_t> d_sites(sites.size());
  test::DeviceBuffer<int64_t> d_seeds(sites.size()), d_offsets(sites.size());
  d_state.upload({rng::RngState{42, 0}});
  d_sites.upload(sites);
  cuda::Stream stream;
  cudaGraph_t graph = nullptr;
  SG_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  write_attention_dropout_seeds(stream, {.state = d_state.get(),
                                         .sites = d_sites.get(),
                                         .seeds = d_seeds.get(),
                                         .offsets = d_offsets.get(),
                                         .count = static_cast<int>(sites.size())});
  SG_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec = nullptr;
  SG_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  for (const uint64_t offset : {uint64_t{0}, uint64_t{1}, uint64_t{7}}) {
    d_state.upload({rng::RngState{42, offset}});
    d_offsets.poison();
    SG_CUDA_CHECK(cudaGraphLaunch(exec, stream));
    stream.synchronize();
    const std::vector<int64_t> seeds = d_seeds.download(), offsets = d_offsets.download();
    for (size_t i = 0; i < sites.size(); ++i) {
      EXPECT_EQ(seeds[i], attention_dropout_seed(42, sites[i], offset)) << "offset " << offset << " slot " << i;
      EXPECT_EQ(offsets[i], attention_dropout_offset(offset)) << "offset " << offset << " slot " << i;
    }
  }
  SG_CUDA_CHECK(cudaGraphExecDestroy(exec));
  SG_CUDA_CHECK(cudaGraphDestroy(graph));
}

}  // namespace
}  // namespace sg::model
