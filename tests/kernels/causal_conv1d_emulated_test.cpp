// The causal conv1d + SiLU kernels (src/kernels/causal_conv1d.cuh), run on the CPU by tests/simt_emulator.h
// with the launchers' own checks and launch sequence (backward kernel, then the partial-sum reduction),
// against the fp32 twin: cases and tolerances as the GPU test (causal_conv1d_case.h). Catches indexing,
// tiling, slot and partial-row mistakes without a GPU; small shapes (the emulator is slow).
#define SG_SIMT_EMULATION 1
#include <gtest/gtest.h>

#include <vector>

#include "core/strings.h"
#include "gpu_test_util.h"  // bf16 conversions only: nothing here touches a GPU
#include "kernels/causal_conv1d.cuh"
#include "kernels/causal_conv1d_case.h"

namespace sg {
namespace {

using test::Conv1dCase;
using test::Conv1dShape;

const Conv1dShape kShapes[] = {
    {1, 1, 16, 16, 0},     // one token, packed, vector path
    {2, 3, 40, 72, 24},    // strided, vector path, every token within the filter's padding
    {2, 70, 24, 40, 8},    // two backward tiles per sequence
    {3, 20, 12, 19, 5},    // scalar path (C, stride and offset not multiples of 8)
    {5, 2, 264, 264, 0},   // two channel blocks in the backward (33 vectors of 8)
    {5, 3300, 8, 8, 0},    // 260 tiles > 256 slots: 32 partial rows, some slots walk two tiles
};

class CausalConv1dEmulated : public ::testing::TestWithParam<Conv1dShape> {};

TEST_P(CausalConv1dEmulated, ForwardAndBackwardMatchReference) {
  const Conv1dCase c = test::make_conv1d_case(GetParam());
  const int64_t T = c.tokens();
  std::vector<bf16> out = test::to_bf16(std::vector<float>(T * c.s.C, NAN));
  std::vector<bf16> din = c.din_poisoned;
  std::vector<float> dw = c.dweight0, db = c.dbias0, scratch(c.scratch_bytes() / sizeof(float), NAN);
  const emu::Launch launch;
  kernels::conv1d::run_forward(launch, c.forward(out.data(), c.rows.data(), c.weight.data(), c.bias.data()));
  kernels::conv1d::run_backward(launch, c.backward(din.data(), dw.data(), db.data(), scratch.data(), c.dout.data(),
                                                   c.rows.data(), c.weight.data(), c.bias.data()));
  test::expect_conv1d_results(c, out, din, dw, db);
}

INSTANTIATE_TEST_SUITE_P(Shapes, CausalConv1dEmulated, ::testing::ValuesIn(kShapes), [](const auto& info) {
  const Conv1dShape& s = info.param;
  return strprintf("B%lld_S%lld_C%lld_stride%lld_at%lld", static_cast<long long>(s.B), static_cast<long long>(s.S),
                   static_cast<long long>(s.C), static_cast<long long>(s.stride), static_cast<long long>(s.offset));
});

}  // namespace
}  // namespace sg
