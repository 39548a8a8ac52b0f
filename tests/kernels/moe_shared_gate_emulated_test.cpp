// The shared expert gate's kernels (src/kernels/moe_shared_gate.cuh) and the gate weight gradient (column_sums with
// row_scale, src/kernels/column_sums.cuh), run on the CPU by tests/simt_emulator.h with the launchers' own checks and
// dispatch, against the CPU twin (reference/moe_shared_gate): cases and tolerances as the GPU test
// (moe_shared_gate_case.h). Small shapes: the emulator is slow. The bits depend on the shape only: the same data one
// element past 16-byte alignment (the scalar path) gives the bits of the 16-byte path; d_shared computed in place
// over dy gives the same bits; bad parameters throw naming the field.
#define SG_SIMT_EMULATION 1
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "core/strings.h"
#include "gpu_test_util.h"  // bf16 conversions only: nothing here touches a GPU
#include "kernel_gpu_test_util.h"
#include "kernels/column_sums.cuh"
#include "kernels/moe_shared_gate.cuh"
#include "kernels/moe_shared_gate_case.h"

namespace sg {
namespace {

using test::MoeSharedGateCase;
using test::MoeSharedGateOutputs;
using test::MoeSharedGateShape;
using test::with_offset;
using test::without_offset;

const MoeSharedGateShape kShapes[] = {
    {0, 8},     // nothing launched
    {1, 1},     // one element: a partial chunk, one warp
    {1, 7},     // a partial chunk
    {3, 8},     // one chunk, 16-byte path
    {32, 64},   // one chunk a thread, 16-byte path, many gates (a logit's last bit often vanishes in the sigmoid)
    {9, 100},   // 13 chunks (the last partial), saturated token 3
    {2, 257},   // 33 chunks over 64 threads
    {2, 2048},  // 256 threads, one chunk each, 16-byte path
    {2, 4099},  // 513 chunks over 256 threads: 3 for thread 0, a partial last one
};

// Forward, backward on the twin's gate, input grad and the weight gradient, with every [T, H] and [H] bf16 buffer
// `offset` elements into its allocation; the overwritten outputs start as NaN. in_place: d_shared over dy.
MoeSharedGateOutputs run(const MoeSharedGateCase& c, int64_t offset, bool in_place = false) {
  const int64_t T = c.s.T, H = c.s.H, o = offset;
  const size_t n = static_cast<size_t>(T * H);
  std::vector<bf16> shared = with_offset(c.shared, o), input = with_offset(c.input, o);
  std::vector<bf16> weight = with_offset(c.weight, o), dy = with_offset(c.dy, o), out = with_offset(c.out0, o);
  std::vector<bf16> d_input = with_offset(c.d_input0, o);
  std::vector<bf16> d_shared = with_offset(test::to_bf16(std::vector<float>(n, NAN)), o);
  std::vector<float> gate(static_cast<size_t>(T), NAN), d_logit(static_cast<size_t>(T), NAN);
  std::vector<float> d_weight = c.d_weight0;
  const size_t scratch_bytes = kernels::column_sums_scratch_bytes(T, H);
  std::vector<float> scratch(scratch_bytes / sizeof(float), NAN);
  bf16* d_shared_ptr = in_place ? dy.data() + o : d_shared.data() + o;
  const emu::Launch launch;
  kernels::shared_gate::run_forward(launch, {.out = out.data() + o,
                                             .gate = gate.data(),
                                             .shared = shared.data() + o,
                                             .input = input.data() + o,
                                             .weight = weight.data() + o,
                                             .T = T,
                                             .H = H});
  kernels::shared_gate::run_backward(launch, {.d_shared = d_shared_ptr,
                                              .d_logit = d_logit.data(),
                                              .dy = dy.data() + o,
                                              .shared = shared.data() + o,
                                              .gate = c.gate_ref.data(),
                                              .T = T,
                                              .H = H});
  kernels::shared_gate::run_input_grad(
      launch, {.d_input = d_input.data() + o, .d_logit = d_logit.data(), .weight = weight.data() + o, .T = T, .H = H});
  kernels::colsums::run_column_sums(launch, {.dst = d_weight.data(),
                                             .scratch = scratch.data(),
                                             .scratch_bytes = scratch_bytes,
                                             .in = input.data() + o,
                                             .rows = T,
                                             .cols = H,
                                             .row_scale = d_logit.data()});
  return {.out = without_offset(out, o),
          .d_shared = without_offset(in_place ? dy : d_shared, o),
          .d_input = without_offset(d_input, o),
          .gate = gate,
          .d_logit = d_logit,
          .d_weight = d_weight};
}

class MoeSharedGateEmulated : public ::testing::TestWithParam<MoeSharedGateShape> {};

TEST_P(MoeSharedGateEmulated, MatchesTwin) {
  const MoeSharedGateCase c = test::make_moe_shared_gate_case(GetParam());
  test::expect_moe_shared_gate_matches_twin(c, run(c, 0));
}

// One element past alignment every bf16 pointer takes the scalar path; the chunks and their order are the same.
TEST_P(MoeSharedGateEmulated, BitsDoNotDependOnTheAlignment) {
  const MoeSharedGateCase c = test::make_moe_shared_gate_case(GetParam());
  const MoeSharedGateOutputs aligned = run(c, 0);
  EXPECT_TRUE(test::bitwise_equal_outputs(run(c, 1), aligned));
}

TEST_P(MoeSharedGateEmulated, InPlaceBackwardGivesTheSameBits) {
  const MoeSharedGateCase c = test::make_moe_shared_gate_case(GetParam());
  EXPECT_TRUE(test::bitwise_equal_outputs(run(c, 0, /*in_place=*/true), run(c, 0)));
}

INSTANTIATE_TEST_SUITE_P(Shapes, MoeSharedGateEmulated, ::testing::ValuesIn(kShapes), [](const auto& info) {
  return strprintf("T%lld_H%lld", static_cast<long long>(info.param.T), static_cast<long long>(info.param.H));
});

// std::vector's allocations are 16-byte aligned here, so offset 0 above is the 16-byte path where H % 8 == 0.
TEST(MoeSharedGateEmulatedMisc, AlignedVectorsTakeThe16BytePath) {
  std::vector<bf16> row(16);
  EXPECT_TRUE(kernels::detail::bf16_vector_path_ok(8, {}, {row.data()}));
  EXPECT_FALSE(kernels::detail::bf16_vector_path_ok(8, {}, {row.data() + 1}));
  EXPECT_FALSE(kernels::detail::bf16_vector_path_ok(7, {}, {row.data()}));
}

TEST(MoeSharedGateEmulatedMisc, ThreadsAreAFunctionOfH) {
  const std::pair<int64_t, int> expected[] = {{1, 32}, {256, 32}, {257, 64}, {2048, 256}, {4099, 256}, {1 << 20, 256}};
  for (const auto& [H, threads] : expected) EXPECT_EQ(kernels::shared_gate::threads_for(H), threads) << "H " << H;
}

TEST(MoeSharedGateEmulatedMisc, RejectsBadParamsNamingTheField) {
  const int64_t T = 4, H = 8;
  std::vector<bf16> a(T * H), b(T * H), s(T * H), w(H);
  std::vector<float> gate(T, 0.5f), d_logit(T);
  const emu::Launch launch;
  test::expect_bad_moe_shared_gate_params_named(
      {.out = a.data(), .gate = gate.data(), .shared = s.data(), .input = b.data(), .weight = w.data(), .T = T, .H = H},
      {.d_shared = a.data(),
       .d_logit = d_logit.data(),
       .dy = b.data(),
       .shared = s.data(),
       .gate = gate.data(),
       .T = T,
       .H = H},
      {.d_input = a.data(), .d_logit = d_logit.data(), .weight = w.data(), .T = T, .H = H}, [&](const auto& p) {
        return test::thrown_message([&] {
          using P = std::decay_t<decltype(p)>;
          if constexpr (std::is_same_v<P, kernels::MoeSharedGateForwardParams>) {
            kernels::shared_gate::run_forward(launch, p);
          } else if constexpr (std::is_same_v<P, kernels::MoeSharedGateBackwardParams>) {
            kernels::shared_gate::run_backward(launch, p);
          } else {
            kernels::shared_gate::run_input_grad(launch, p);
          }
        });
      });
}

}  // namespace
}  // namespace sg
