// GPU dropout against reference/dropout: the mask must be BITWISE the CPU's (same Philox stream), and
// since the kept values are the same fp32 product rounded once, the bf16 outputs must equal
// bf16(reference) exactly. The RNG state is read from device memory: changing it there (no new launch
// parameters, including inside a replayed CUDA graph) changes the mask to the CPU mask of the new state.
// Outputs are poisoned before each run.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "core/strings.h"
#include "cuda/stream.h"
#include "gpu_test_util.h"
#include "kernels/dropout.h"
#include "reference/dropout.h"

namespace {

using namespace sg;
using namespace sg::test;

void sync() { SG_CUDA_CHECK(cudaDeviceSynchronize()); }

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

// Nonzero bf16 inputs, so a zero output means "dropped".
std::vector<float> nonzero_inputs(int64_t n, uint64_t seed) {
  auto v = round_bf16(random_normal(n, seed));
  for (auto& x : v)
    if (x == 0.0f) x = 1.0f;
  return v;
}

std::vector<float> cpu_forward(const std::vector<float>& in, float p, rng::RngState s, uint32_t site) {
  std::vector<float> out(in.size());
  ref::dropout_forward(out.data(), in.data(), static_cast<int64_t>(in.size()), p, s, site);
  return out;
}

struct Case {
  int64_t n;
  float p;
};
const Case kCases[] = {{1, 0.5f}, {7, 0.1f}, {1000, 0.1f}, {4099, 0.5f}, {(1 << 20) + 3, 0.1f}, {(1 << 20) + 1, 0.9f}};

class DropoutGpu : public ::testing::TestWithParam<Case> {};

TEST_P(DropoutGpu, MaskAndValuesEqualCpuBitwise) {
  const auto [n, p] = GetParam();
  const uint32_t site = 17;
  const rng::RngState state{0x123456789abcdefULL, 41};
  const auto in = nonzero_inputs(n, 500 + n);
  const auto dout = nonzero_inputs(n, 600 + n);
  const auto want = cpu_forward(in, p, state, site);
  std::vector<float> want_din(n);
  ref::dropout_backward(want_din.data(), dout.data(), n, p, state, site);

  DeviceBuffer<bf16> d_in(n), d_out(n), d_dout(n), d_din(n);
  DeviceBuffer<rng::RngState> d_state(1);
  d_in.upload(to_bf16(in));
  d_dout.upload(to_bf16(dout));
  d_state.upload({state});
  d_out.poison();
  d_din.poison();
  sync();
  cuda::Stream stream;
  kernels::dropout_forward(
      stream, {.out = d_out.get(), .in = d_in.get(), .state = d_state.get(), .n = n, .p = p, .site = site});
  kernels::dropout_backward(
      stream, {.din = d_din.get(), .dout = d_dout.get(), .state = d_state.get(), .n = n, .p = p, .site = site});
  sync();
  const auto out = d_out.download();
  const auto out_f = to_float(out);
  int64_t mask_mismatches = 0;
  for (int64_t i = 0; i < n; ++i) mask_mismatches += (out_f[i] == 0.0f) != (want[i] == 0.0f);
  EXPECT_EQ(mask_mismatches, 0) << "n=" << n << " p=" << p;
  EXPECT_TRUE(same_bits(out, to_bf16(want))) << "forward values differ from bf16(reference)";
  EXPECT_TRUE(same_bits(d_din.download(), to_bf16(want_din))) << "backward differs from bf16(reference)";

  // In place (out == in) gives the same bits.
  kernels::dropout_forward(stream,
                           {.out = d_in.get(), .in = d_in.get(), .state = d_state.get(), .n = n, .p = p, .site = site});
  sync();
  EXPECT_TRUE(same_bits(d_in.download(), out));
}

INSTANTIATE_TEST_SUITE_P(Cases, DropoutGpu, ::testing::ValuesIn(kCases), [](const auto& info) {
  return strprintf("n%lld_p%d", static_cast<long long>(info.param.n), static_cast<int>(info.param.p * 100));
});

TEST(DropoutGpuMisc, ReadsRngStateFromDeviceMemoryAlsoInAGraph) {
  const int64_t n = 10007;
  const float p = 0.3f;
  const uint32_t site = 3;
  const auto in = nonzero_inputs(n, 700);
  DeviceBuffer<bf16> d_in(n), d_out(n);
  DeviceBuffer<rng::RngState> d_state(1);
  d_in.upload(to_bf16(in));
  cuda::Stream stream;
  const kernels::DropoutForwardParams params{
      .out = d_out.get(), .in = d_in.get(), .state = d_state.get(), .n = n, .p = p, .site = site};

  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  SG_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  kernels::dropout_forward(stream, params);
  SG_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  SG_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));

  std::vector<bf16> previous;
  for (uint64_t offset : {0ULL, 1ULL, 2ULL}) {
    const rng::RngState state{99, offset};
    d_state.upload({state});
    for (bool replay : {false, true}) {
      d_out.poison();
      sync();
      if (replay) {
        SG_CUDA_CHECK(cudaGraphLaunch(exec, stream));
      } else {
        kernels::dropout_forward(stream, params);
      }
      sync();
      const auto out = d_out.download();
      EXPECT_TRUE(same_bits(out, to_bf16(cpu_forward(in, p, state, site))))
          << "offset " << offset << (replay ? " (graph replay)" : " (eager)");
      if (!previous.empty() && !replay) EXPECT_FALSE(same_bits(out, previous)) << "offset did not change the mask";
      if (!replay) previous = out;
    }
  }
  SG_CUDA_CHECK(cudaGraphExecDestroy(exec));
  SG_CUDA_CHECK(cudaGraphDestroy(graph));
}

TEST(DropoutGpuMisc, ZeroPCopiesAndBadPThrows) {
  const int64_t n = 333;
  const auto in = nonzero_inputs(n, 800);
  DeviceBuffer<bf16> d_in(n), d_out(n);
  DeviceBuffer<rng::RngState> d_state(1);
  d_in.upload(to_bf16(in));
  d_state.upload({rng::RngState{1, 2}});
  d_out.poison();
  sync();
  cuda::Stream stream;
  kernels::dropout_forward(
      stream, {.out = d_out.get(), .in = d_in.get(), .state = d_state.get(), .n = n, .p = 0.0f, .site = 0});
  sync();
  EXPECT_TRUE(same_bits(d_out.download(), to_bf16(in)));
  EXPECT_THROW(
      kernels::dropout_forward(
          stream, {.out = d_out.get(), .in = d_in.get(), .state = d_state.get(), .n = n, .p = 1.0f, .site = 0}),
      Error);
}

}  // namespace
