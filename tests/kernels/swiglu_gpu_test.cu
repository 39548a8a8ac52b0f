// GPU SwiGLU forward/backward against reference/swiglu on the same bf16-rounded inputs.
// Tolerance: bf16 outputs computed in fp32 from identical inputs, relative error < kBf16RelTol (1e-2).
// Outputs poisoned before each run; a second run is bitwise identical.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "core/strings.h"
#include "cuda/stream.h"
#include "gpu_test_util.h"
#include "kernels/swiglu.h"
#include "reference/swiglu.h"

namespace {

using namespace sg;
using namespace sg::test;

void sync() { SG_CUDA_CHECK(cudaDeviceSynchronize()); }

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

struct Shape {
  int64_t T, F;
};
const Shape kShapes[] = {{1, 64}, {7, 100}, {257, 256}, {1000, 768}, {33, 2056}, {3, 37}, {8192, 5632}};

class SwiGluGpu : public ::testing::TestWithParam<Shape> {};

TEST_P(SwiGluGpu, ForwardAndBackwardMatchReference) {
  const auto [T, F] = GetParam();
  // Gate with a wide spread so silu's saturated and linear regions are both exercised.
  const auto gate_up = round_bf16(random_normal(T * 2 * F, 100 + T + F, 3.0f));
  const auto dout = round_bf16(random_normal(T * F, 200 + T + F));
  std::vector<float> out_ref(T * F), dgu_ref(T * 2 * F);
  ref::swiglu_forward(out_ref.data(), gate_up.data(), T, F);
  ref::swiglu_backward(dgu_ref.data(), dout.data(), gate_up.data(), T, F);

  DeviceBuffer<bf16> d_gu(T * 2 * F), d_dout(T * F), d_out(T * F), d_dgu(T * 2 * F);
  d_gu.upload(to_bf16(gate_up));
  d_dout.upload(to_bf16(dout));
  cuda::Stream stream;
  auto run = [&] {
    d_out.poison();
    d_dgu.poison();
    sync();
    kernels::swiglu_forward(stream, {d_out.get(), d_gu.get(), T, F});
    kernels::swiglu_backward(stream, {d_dgu.get(), d_dout.get(), d_gu.get(), T, F});
    sync();
  };
  run();
  const auto out = d_out.download();
  const auto dgu = d_dgu.download();
  EXPECT_LT(relative_error(to_float(out), out_ref), kBf16RelTol) << "T=" << T << " F=" << F;
  EXPECT_LT(relative_error(to_float(dgu), dgu_ref), kBf16RelTol) << "T=" << T << " F=" << F;
  // The gate and up halves separately (one half wrong could hide in the norm of both).
  const auto dgu_f = to_float(dgu);
  std::vector<float> dg(T * F), du(T * F), dg_ref(T * F), du_ref(T * F);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t j = 0; j < F; ++j) {
      dg[t * F + j] = dgu_f[t * 2 * F + j];
      du[t * F + j] = dgu_f[t * 2 * F + F + j];
      dg_ref[t * F + j] = dgu_ref[t * 2 * F + j];
      du_ref[t * F + j] = dgu_ref[t * 2 * F + F + j];
    }
  EXPECT_LT(relative_error(dg, dg_ref), kBf16RelTol);
  EXPECT_LT(relative_error(du, du_ref), kBf16RelTol);
  run();
  EXPECT_TRUE(same_bits(d_out.download(), out));
  EXPECT_TRUE(same_bits(d_dgu.download(), dgu));
}

INSTANTIATE_TEST_SUITE_P(Shapes, SwiGluGpu, ::testing::ValuesIn(kShapes), [](const auto& info) {
  return strprintf("T%lld_F%lld", static_cast<long long>(info.param.T), static_cast<long long>(info.param.F));
});

}  // namespace
