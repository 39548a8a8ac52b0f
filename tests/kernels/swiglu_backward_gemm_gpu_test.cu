// GPU SwiGLU backward GEMM (kernels/swiglu_backward_gemm.h) against its CPU twin: ref::linear_backward_input,
// rounded to bf16 (the unfused path stores dh as bf16), then ref::swiglu_backward, on the same bf16-rounded
// inputs. Tolerance: relative error in norm < kBf16RelTol (1e-2), for the whole output and for the gate and up
// halves separately (the twin's fp32 sums may round dh one bf16 step apart from the GPU's). Also against the
// GPU's two-kernel path (cuBLASLt + kernels::swiglu_backward), which it replaces in the MLP. Shapes: T not a
// multiple of the 128-row tile, H below one 64-deep k-block and above, F not a multiple of the 128-column tile.
// Outputs poisoned (NaN) before each run; a second run, and a run on other buffers (new kernel parameters), are
// bitwise identical.
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/strings.h"
#include "cuda/device.h"
#include "cuda/stream.h"
#include "gpu_test_util.h"
#include "kernels/gemm.h"
#include "kernels/swiglu.h"
#include "kernels/swiglu_backward_gemm.h"
#include "reference/linear.h"
#include "reference/swiglu.h"

namespace {

using namespace sg;
using namespace sg::test;

struct Shape {
  int64_t T, H, F;
};
const Shape kShapes[] = {{1, 8, 8}, {130, 16, 24}, {257, 136, 200}, {1000, 264, 520}, {64, 768, 2056}};

void sync() { SG_CUDA_CHECK(cudaDeviceSynchronize()); }

bool same_bits(const std::vector<bf16>& a, const std::vector<bf16>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(bf16)) == 0;
}

// The gate (half = 0) or up (half = 1) columns of a [T, 2F] row-major buffer.
std::vector<float> half_of(const std::vector<float>& v, int64_t T, int64_t F, int half) {
  std::vector<float> out(T * F);
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t j = 0; j < F; ++j) out[t * F + j] = v[t * 2 * F + half * F + j];
  }
  return out;
}

void expect_close(const std::vector<float>& got, const std::vector<float>& want, int64_t T, int64_t F,
                  const std::string& what) {
  EXPECT_LT(relative_error(got, want), kBf16RelTol) << what;
  EXPECT_LT(relative_error(half_of(got, T, F, 0), half_of(want, T, F, 0)), kBf16RelTol) << what << ", gate half";
  EXPECT_LT(relative_error(half_of(got, T, F, 1), half_of(want, T, F, 1)), kBf16RelTol) << what << ", up half";
}

class SwiGluBackwardGemmGpu : public ::testing::TestWithParam<Shape> {};

TEST_P(SwiGluBackwardGemmGpu, MatchesReferenceAndTheTwoKernelPath) {
  if (cuda::device_properties().compute_capability() != 90) GTEST_SKIP() << "built for sm_90a only";
  const auto [T, H, F] = GetParam();
  const auto dy = round_bf16(random_normal(T * H, 300 + T + H));
  const auto w = round_bf16(random_normal(H * F, 400 + H + F, 0.05f));
  const auto gate_up = round_bf16(random_normal(T * 2 * F, 500 + T + F, 3.0f));  // silu saturated and linear
  std::vector<float> dh_ref(T * F), dgu_ref(T * 2 * F);
  ref::linear_backward_input(dh_ref.data(), dy.data(), w.data(), T, F, H);
  dh_ref = round_bf16(dh_ref);
  ref::swiglu_backward(dgu_ref.data(), dh_ref.data(), gate_up.data(), T, F);

  DeviceBuffer<bf16> d_dy(T * H), d_w(H * F), d_gu(T * 2 * F), d_got(T * 2 * F), d_other(T * 2 * F),
      d_dh(T * F), d_two(T * 2 * F);
  d_dy.upload(to_bf16(dy));
  d_w.upload(to_bf16(w));
  d_gu.upload(to_bf16(gate_up));
  cuda::Stream stream;
  kernels::SwiGluBackwardGemm fused(T, H, F);
  auto run = [&](DeviceBuffer<bf16>& out) {
    out.poison();
    sync();
    fused.run(stream, {.d_gate_up = out.get(), .dy = d_dy.get(), .w_down = d_w.get(), .gate_up = d_gu.get()});
    sync();
    return out.download();
  };
  const auto got = run(d_got);
  const std::string shape = strprintf("T=%lld H=%lld F=%lld", (long long)T, (long long)H, (long long)F);
  expect_close(to_float(got), dgu_ref, T, F, shape);

  // The two kernels the MLP runs without it.
  kernels::Blas blas;
  const kernels::LinearBackwardInput down_dx(blas, T, F, H);
  d_two.poison();
  sync();
  down_dx.run(stream, d_dh.get(), d_dy.get(), d_w.get());
  kernels::swiglu_backward(stream,
                           {.dgate_up = d_two.get(), .dout = d_dh.get(), .gate_up = d_gu.get(), .T = T, .F = F});
  sync();
  expect_close(to_float(got), to_float(d_two.download()), T, F, shape + ", against cuBLASLt + swiglu_backward");

  EXPECT_TRUE(same_bits(run(d_got), got)) << "a second run differs";
  EXPECT_TRUE(same_bits(run(d_other), got)) << "a run on another output buffer differs";
}

INSTANTIATE_TEST_SUITE_P(Shapes, SwiGluBackwardGemmGpu, ::testing::ValuesIn(kShapes), [](const auto& info) {
  return strprintf("T%lld_H%lld_F%lld", static_cast<long long>(info.param.T), static_cast<long long>(info.param.H),
                   static_cast<long long>(info.param.F));
});

TEST(SwiGluBackwardGemmGpuPlan, RefusesRowsThatAreNotWholeTmaVectors) {
  if (cuda::device_properties().compute_capability() != 90) GTEST_SKIP() << "built for sm_90a only";
  EXPECT_THROW(kernels::SwiGluBackwardGemm(64, 100, 64), Error);
  EXPECT_THROW(kernels::SwiGluBackwardGemm(64, 64, 36), Error);
  EXPECT_FALSE(kernels::swiglu_backward_gemm_preferred(64, 100, 64));
}

// The rule of swiglu_backward_gemm.h and the environment variable that overrides it.
TEST(SwiGluBackwardGemmGpuPlan, PreferredWhereMeasuredToPayUnlessTheEnvironmentSaysOtherwise) {
  if (cuda::device_properties().compute_capability() != 90) GTEST_SKIP() << "built for sm_90a only";
  const ScopedEnv env("STEPGRAPH_SWIGLU_BACKWARD_GEMM", nullptr);  // restored at the end
  EXPECT_TRUE(kernels::swiglu_backward_gemm_preferred(8192, 768, 2048)) << "llama/small";
  EXPECT_FALSE(kernels::swiglu_backward_gemm_preferred(8192, 2048, 5632)) << "llama/1b: H > 1024";
  EXPECT_FALSE(kernels::swiglu_backward_gemm_preferred(1024, 256, 704)) << "llama/tiny: 48 tiles, under one wave";
  setenv("STEPGRAPH_SWIGLU_BACKWARD_GEMM", "0", 1);
  EXPECT_FALSE(kernels::swiglu_backward_gemm_preferred(8192, 768, 2048));
  setenv("STEPGRAPH_SWIGLU_BACKWARD_GEMM", "always", 1);
  EXPECT_TRUE(kernels::swiglu_backward_gemm_preferred(1024, 256, 704));
  EXPECT_TRUE(kernels::swiglu_backward_gemm_preferred(8192, 2048, 5632));
  EXPECT_FALSE(kernels::swiglu_backward_gemm_preferred(64, 100, 64)) << "always, but only where supported";
  setenv("STEPGRAPH_SWIGLU_BACKWARD_GEMM", "yes", 1);
  EXPECT_THROW(kernels::swiglu_backward_gemm_preferred(8192, 768, 2048), Error);
}

}  // namespace
