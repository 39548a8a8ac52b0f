// GPU SwiGLU forward/backward against reference/swiglu on the same bf16-rounded inputs.
// Tolerances: in norm, relative error < kBf16RelTol (1e-2); and per element (expect_elementwise_bounds),
// the output's bf16 rounding (2^-8 relative) plus the fp32 error of both sides, whose largest part is the
// kernel's hardware sigmoid (kernels/silu.cuh: (4.5 + 1.173 |g|) 2^-23 relative): with E = (10 + 1.2 |g|)
// 2^-23, |out - ref| and |dup - ref| <= (2^-8 + 2E) |ref|, and |dgate - ref| <= 2^-8 |ref| + 2E |dy up sig|
// (1 + 2|g|) (silu' = sig (1 + g (1 - sig)) cancels near g = -1.28, so its error is absolute).
// Outputs poisoned before each run; a second run is bitwise identical.
#include <gtest/gtest.h>

#include <cmath>
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

// The per-element bounds of the header comment; `what` names the output in failures.
void expect_elementwise_bounds(const std::vector<float>& gate_up, const std::vector<float>& dout,
                               const std::vector<float>& out, const std::vector<float>& out_ref,
                               const std::vector<float>& dgu, const std::vector<float>& dgu_ref, int64_t T,
                               int64_t F) {
  const double u8 = std::ldexp(1.0, -8), ulp = std::ldexp(1.0, -23), tiny = 1e-30;
  int64_t bad[3] = {0, 0, 0};
  const char* names[3] = {"out", "dgate", "dup"};
  auto check = [&](int which, double got, double ref, double bound, int64_t t, int64_t j) {
    if (std::abs(got - ref) <= bound) return;
    if (bad[which]++ < 3) {
      ADD_FAILURE() << names[which] << "[" << t << ", " << j << "] = " << got << ", reference " << ref << ", bound "
                    << bound;
    }
  };
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t j = 0; j < F; ++j) {
      const double g = gate_up[t * 2 * F + j], up = gate_up[t * 2 * F + F + j], dy = dout[t * F + j];
      const double sig = 1.0 / (1.0 + std::exp(-g));
      const double e = (10.0 + 1.2 * std::abs(g)) * ulp;
      const double r_out = out_ref[t * F + j], r_dg = dgu_ref[t * 2 * F + j], r_du = dgu_ref[t * 2 * F + F + j];
      check(0, out[t * F + j], r_out, (u8 + 2 * e) * std::abs(r_out) + tiny, t, j);
      check(1, dgu[t * 2 * F + j], r_dg,
            u8 * std::abs(r_dg) + 2 * e * std::abs(dy * up) * sig * (1.0 + 2.0 * std::abs(g)) + tiny, t, j);
      check(2, dgu[t * 2 * F + F + j], r_du, (u8 + 2 * e) * std::abs(r_du) + tiny, t, j);
    }
  }
  EXPECT_EQ(bad[0] + bad[1] + bad[2], 0) << "elements outside their bound (out, dgate, dup): " << bad[0] << ", "
                                         << bad[1] << ", " << bad[2];
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
    kernels::swiglu_forward(stream, {.out = d_out.get(), .gate_up = d_gu.get(), .T = T, .F = F});
    kernels::swiglu_backward(stream,
                             {.dgate_up = d_dgu.get(), .dout = d_dout.get(), .gate_up = d_gu.get(), .T = T, .F = F});
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
  expect_elementwise_bounds(gate_up, dout, to_float(out), out_ref, dgu_f, dgu_ref, T, F);
  run();
  EXPECT_TRUE(same_bits(d_out.download(), out));
  EXPECT_TRUE(same_bits(d_dgu.download(), dgu));
}

INSTANTIATE_TEST_SUITE_P(Shapes, SwiGluGpu, ::testing::ValuesIn(kShapes), [](const auto& info) {
  return strprintf("T%lld_F%lld", static_cast<long long>(info.param.T), static_cast<long long>(info.param.F));
});

}  // namespace
