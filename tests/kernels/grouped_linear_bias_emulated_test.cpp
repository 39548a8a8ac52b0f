// The grouped linears' per-group bias kernels (src/kernels/grouped_linear_bias.cuh), run on the CPU by
// tests/simt_emulator.h with the launchers' own checks and launch sequences, against the CPU twin
// (reference/grouped_gemm): cases and checks as the GPU test (grouped_linear_bias_case.h), at small shapes (the
// emulator is slow). The scratch starts as NaN, so a partial row the reduction reads but no block wrote fails. The
// bits do not depend on the path: the same data one element past 16-byte alignment (the scalar kernels) gives the
// bits of the 16-byte path. Bad parameters throw naming the field.
#define SG_SIMT_EMULATION 1
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "gpu_test_util.h"  // bf16 conversions only: nothing here touches a GPU
#include "kernel_gpu_test_util.h"
#include "kernels/grouped_linear_bias.cuh"
#include "kernels/grouped_linear_bias_case.h"
#include "test_util.h"

namespace sg {
namespace {

using test::GroupedBiasCase;
using test::GroupedBiasShape;

std::vector<GroupedBiasShape> shapes() {
  return {test::packed_groups("one_group", 16, {5}),
          test::packed_groups("zero_groups", 24, {0, 7, 0, 3, 0}),
          test::packed_groups("all_on_one", 8, {0, 0, 300, 0}),  // two chunks of 256 rows, the second partial
          test::packed_groups("skewed_odd_cols", 13, {1, 257, 2, 0, 9}, 3),
          test::capacity_groups("capacity_padding", 40, 12, {12, 0, 5, 11}),
          test::capacity_groups("all_empty", 8, 4, {0, 0, 0}),
          test::random_groups("groups40", 16, 40, 9, 3)};
}

// Forward then backward, every bf16 buffer `offset` elements into its allocation (1: the scalar kernels).
struct Results {
  std::vector<bf16> y;
  std::vector<float> dbias;
};
Results run(const GroupedBiasCase& c, int64_t offset) {
  const int64_t o = offset;
  std::vector<bf16> y(c.y0.size() + o), bias(c.bias.size() + o), dy(c.dy.size() + o);
  std::copy(c.y0.begin(), c.y0.end(), y.begin() + o);
  std::copy(c.bias.begin(), c.bias.end(), bias.begin() + o);
  std::copy(c.dy.begin(), c.dy.end(), dy.begin() + o);
  std::vector<float> dbias = c.dst0, scratch(c.scratch_bytes() / sizeof(float), NAN);
  const emu::Launch launch;
  kernels::grouped_bias::run_forward(launch, {.y = y.data() + o,
                                              .bias = bias.data() + o,
                                              .counts = c.s.counts.data(),
                                              .offsets = c.s.offsets.data(),
                                              .num_groups = c.groups(),
                                              .max_rows = c.s.max_rows,
                                              .cols = c.s.cols});
  kernels::grouped_bias::run_backward(launch, {.dst = dbias.data(),
                                               .scratch = scratch.data(),
                                               .scratch_bytes = c.scratch_bytes(),
                                               .dy = dy.data() + o,
                                               .counts = c.s.counts.data(),
                                               .offsets = c.s.offsets.data(),
                                               .num_groups = c.groups(),
                                               .max_rows = c.s.max_rows,
                                               .cols = c.s.cols});
  return {std::vector<bf16>(y.begin() + o, y.end()), dbias};
}

TEST(GroupedBiasEmulated, MatchesTheTwinAndTheBitsDoNotDependOnThePath) {
  for (const GroupedBiasShape& shape : shapes()) {
    SCOPED_TRACE(shape.name);
    const GroupedBiasCase c = test::make_grouped_bias_case(shape);
    const Results aligned = run(c, 0);
    test::expect_grouped_bias_forward(c, aligned.y);
    test::expect_grouped_bias_backward(c, aligned.dbias);
    const Results scalar = run(c, 1);
    EXPECT_TRUE(test::bitwise_equal(scalar.y, aligned.y));
    EXPECT_TRUE(test::bitwise_equal(scalar.dbias, aligned.dbias));
  }
}

// A bf16 gradient: the fp32 sum added to the widened start and rounded once (the fp32 launch's sum, rounded).
TEST(GroupedBiasEmulated, IntoABf16GradientRoundsOnce) {
  const GroupedBiasCase c = test::make_grouped_bias_case(test::packed_groups("zero_groups", 24, {0, 7, 0, 300, 1}));
  const std::vector<float> start = test::round_bf16(c.dst0);
  std::vector<float> dst32 = start, scratch(c.scratch_bytes() / sizeof(float), NAN);
  std::vector<bf16> dst16 = test::to_bf16(start);
  for (const kernels::FloatBuffer dst : {kernels::FloatBuffer(dst32.data()), kernels::FloatBuffer(dst16.data())}) {
    kernels::grouped_bias::run_backward(emu::Launch{}, {.dst = dst,
                                                        .scratch = scratch.data(),
                                                        .scratch_bytes = c.scratch_bytes(),
                                                        .dy = c.dy.data(),
                                                        .counts = c.s.counts.data(),
                                                        .offsets = c.s.offsets.data(),
                                                        .num_groups = c.groups(),
                                                        .max_rows = c.s.max_rows,
                                                        .cols = c.s.cols});
  }
  EXPECT_TRUE(test::bitwise_equal(dst16, test::to_bf16(dst32)));
  EXPECT_FALSE(test::bitwise_equal(test::to_float(dst16), start)) << "nothing was added";
}

TEST(GroupedBiasEmulated, BadParametersThrowNamingTheField) {
  const GroupedBiasCase c = test::make_grouped_bias_case(test::packed_groups("two", 8, {3, 4}));
  std::vector<float> dbias = c.dst0, scratch(c.scratch_bytes() / sizeof(float));
  kernels::GroupedBiasBackwardParams p{.dst = dbias.data(),
                                       .scratch = scratch.data(),
                                       .scratch_bytes = c.scratch_bytes() - sizeof(float),
                                       .dy = c.dy.data(),
                                       .counts = c.s.counts.data(),
                                       .offsets = c.s.offsets.data(),
                                       .num_groups = c.groups(),
                                       .max_rows = c.s.max_rows,
                                       .cols = c.s.cols};
  const auto message = [&](const kernels::GroupedBiasBackwardParams& q) {
    return test::thrown_message([&] { kernels::grouped_bias::run_backward(emu::Launch{}, q); });
  };
  EXPECT_NE(message(p).find("grouped_bias_scratch_bytes(max_rows, num_groups, cols)"), std::string::npos);
  p.scratch_bytes = c.scratch_bytes();
  p.counts = nullptr;
  EXPECT_NE(message(p).find("grouped_bias_backward: counts or offsets is null"), std::string::npos);
  p.counts = c.s.counts.data();
  p.num_groups = 0;
  EXPECT_NE(message(p).find("num_groups=0"), std::string::npos);
  std::vector<bf16> y = c.y0;
  const std::string forward = test::thrown_message([&] {
    kernels::grouped_bias::run_forward(emu::Launch{}, {.y = y.data(),
                                                       .bias = nullptr,
                                                       .counts = c.s.counts.data(),
                                                       .offsets = c.s.offsets.data(),
                                                       .num_groups = c.groups(),
                                                       .max_rows = c.s.max_rows,
                                                       .cols = c.s.cols});
  });
  EXPECT_NE(forward.find("grouped_bias_forward: y or bias is null"), std::string::npos) << forward;
}

}  // namespace
}  // namespace sg
