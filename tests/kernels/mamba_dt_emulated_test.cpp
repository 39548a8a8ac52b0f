// The dt / A kernels (src/kernels/mamba_dt.cuh), run on the CPU by tests/simt_emulator.h with the
// launchers' own checks and launch sequence (backward kernel, then the partial-sum reduction), against the
// fp32 twin: cases and tolerances as the GPU test (mamba_dt_case.h). Small shapes: the emulator is slow. Into bf16
// main gradients (ddp.grad_reduce_in_fp32=false): dt_bias's column sums give bit for bit the fp32 launch's result on
// the rounded start, rounded once (the shared column-sum launcher's bf16 path); A_log's add within one bf16 step.
#define SG_SIMT_EMULATION 1
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "core/strings.h"
#include "gpu_test_util.h"  // bf16 conversions only: nothing here touches a GPU
#include "kernels/mamba_dt.cuh"
#include "kernels/mamba_dt_case.h"
#include "reference/mamba_dt.h"

namespace sg {
namespace {

using test::DtCase;
using test::DtShape;

const DtShape kShapes[] = {
    {1, 1, 1, 0},
    {3, 8, 392, 384},               // a tiny in_proj row [z 128 | xBC 256 | dt 8]
    {37, 33, 40, 7},                // two head blocks, odd offset
    {1500, 5, 5, 0, 0.05f, 1.0f},   // more tokens than slots (1024), packed, clipped on both sides
};

class MambaDtEmulated : public ::testing::TestWithParam<DtShape> {};

TEST_P(MambaDtEmulated, ForwardAndBackwardMatchReference) {
  const DtCase c = test::make_dt_case(GetParam());
  std::vector<float> dt(c.s.T * c.s.H, NAN), dbias = c.dbias0, scratch(c.scratch_bytes() / sizeof(float), NAN);
  std::vector<bf16> draw = c.draw_poisoned;
  const emu::Launch launch;
  kernels::mamba_dt::run_dt_forward(launch, c.forward(dt.data(), c.rows.data(), c.bias.data()));
  kernels::mamba_dt::run_dt_backward(
      launch, c.backward(draw.data(), dbias.data(), scratch.data(), c.ddt.data(), c.rows.data(), c.bias.data()));
  test::expect_dt_results(c, dt, draw, dbias);
}

TEST_P(MambaDtEmulated, BackwardIntoBf16GradientsRoundsTheFp32SumOnce) {
  const DtCase c = test::make_dt_case(GetParam());
  const std::vector<float> dbias0 = test::round_bf16(c.dbias0);
  std::vector<float> dbias32 = dbias0, scratch(c.scratch_bytes() / sizeof(float), NAN);
  std::vector<bf16> dbias16 = test::to_bf16(dbias0), draw = c.draw_poisoned;
  const emu::Launch launch;
  kernels::mamba_dt::run_dt_backward(
      launch, c.backward(draw.data(), dbias32.data(), scratch.data(), c.ddt.data(), c.rows.data(), c.bias.data()));
  draw = c.draw_poisoned;
  kernels::mamba_dt::run_dt_backward(
      launch, c.backward(draw.data(), dbias16.data(), scratch.data(), c.ddt.data(), c.rows.data(), c.bias.data()));
  EXPECT_EQ(test::to_float(dbias16), test::round_bf16(dbias32));
}

INSTANTIATE_TEST_SUITE_P(Shapes, MambaDtEmulated, ::testing::ValuesIn(kShapes), [](const auto& info) {
  const DtShape& s = info.param;
  return strprintf("T%lld_H%lld_stride%lld_at%lld", static_cast<long long>(s.T), static_cast<long long>(s.H),
                   static_cast<long long>(s.stride), static_cast<long long>(s.offset));
});

TEST(MambaAEmulated, ForwardAndBackwardMatchReference) {
  const int64_t H = 300;  // two blocks
  auto A_log = test::random_normal(H, 5, 0.8f);
  for (auto& a : A_log) a += 2.0f;
  const auto dA = test::random_normal(H, 6, 10.0f);
  std::vector<float> A(H, NAN), A_ref(H), dA_log = test::random_normal(H, 7), dA_log_ref = dA_log;
  ref::mamba_a_forward(A_ref.data(), A_log.data(), H);
  ref::mamba_a_backward(dA_log_ref.data(), dA.data(), A_log.data(), H);
  const emu::Launch launch;
  kernels::mamba_dt::run_a_forward(launch, {.A = A.data(), .A_log = A_log.data(), .H = H});
  kernels::mamba_dt::run_a_backward(launch, {.dA_log = dA_log.data(), .dA = dA.data(), .A_log = A_log.data(), .H = H});
  EXPECT_LT(test::relative_error(A, A_ref), test::kFp32RelTol);
  EXPECT_LT(test::relative_error(dA_log, dA_log_ref), test::kFp32RelTol);

  // Into a bf16 dA_log: the twin's result on the rounded start, within one bf16 step of its rounding.
  const std::vector<float> start = test::round_bf16(test::random_normal(H, 7));
  std::vector<float> ref16 = start;
  ref::mamba_a_backward(ref16.data(), dA.data(), A_log.data(), H);
  std::vector<bf16> dA_log16 = test::to_bf16(start);
  kernels::mamba_dt::run_a_backward(launch,
                                    {.dA_log = dA_log16.data(), .dA = dA.data(), .A_log = A_log.data(), .H = H});
  const std::vector<float> got = test::to_float(dA_log16);
  for (int64_t h = 0; h < H; ++h) {
    EXPECT_LE(std::abs(got[h] - test::round_bf16({ref16[h]})[0]), std::abs(ref16[h]) / 128.0f) << "head " << h;
  }
  EXPECT_NE(got, start) << "nothing was added";
}

}  // namespace
}  // namespace sg
