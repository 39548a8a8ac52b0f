// The squared ReLU kernel (src/kernels/squared_relu.cuh), run on the CPU by tests/simt_emulator.h with the
// launchers' own checks and dispatch: bit for bit the fp32 twin rounded to bf16 (the same operations), on
// the vector path and the scalar path, out of place and in place.
#define SG_SIMT_EMULATION 1
#include <gtest/gtest.h>

#include <vector>

#include "gpu_test_util.h"  // bf16 conversions only: nothing here touches a GPU
#include "kernel_gpu_test_util.h"
#include "kernels/squared_relu.cuh"
#include "reference/squared_relu.h"

namespace sg {
namespace {

TEST(SquaredReluEmulated, MatchesReferenceBitwise) {
  for (auto [T, F] : {std::pair<int64_t, int64_t>{1, 1}, {3, 37}, {4, 64}, {9, 520}}) {
    const int64_t n = T * F;
    const auto x = test::round_bf16(test::random_normal(n, 300 + n, 2.0f));
    const auto g = test::round_bf16(test::random_normal(n, 400 + n));
    std::vector<float> out_ref(n), din_ref(n);
    ref::squared_relu_forward(out_ref.data(), x.data(), T, F);
    ref::squared_relu_backward(din_ref.data(), g.data(), x.data(), T, F);
    const auto x16 = test::to_bf16(x), g16 = test::to_bf16(g);
    std::vector<bf16> out = test::to_bf16(std::vector<float>(n, NAN)), din = out;
    const emu::Launch launch;
    kernels::squared_relu::run_forward(launch, {.out = out.data(), .in = x16.data(), .T = T, .F = F});
    kernels::squared_relu::run_backward(launch,
                                        {.din = din.data(), .dout = g16.data(), .in = x16.data(), .T = T, .F = F});
    EXPECT_TRUE(test::bitwise_equal(out, test::to_bf16(out_ref))) << "T=" << T << " F=" << F;
    EXPECT_TRUE(test::bitwise_equal(din, test::to_bf16(din_ref))) << "T=" << T << " F=" << F;
    auto inplace = x16;
    kernels::squared_relu::run_forward(launch, {.out = inplace.data(), .in = inplace.data(), .T = T, .F = F});
    EXPECT_TRUE(test::bitwise_equal(inplace, out)) << "in place, T=" << T << " F=" << F;
  }
}

}  // namespace
}  // namespace sg
