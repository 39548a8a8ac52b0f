// The column-sum kernel (src/kernels/column_sums.cuh), run on the CPU by tests/simt_emulator.h with the launcher's
// own checks and launch sequence (slot kernel, then the partial-sum reduction), against the fp32 twin: cases and
// tolerance as the GPU test (column_sums_case.h). Small shapes: the emulator is slow. The bits depend on the shape
// only: the same matrix in packed or strided rows, through the 16-byte or the scalar path, gives the same bits.
// Into a bf16 main gradient: bit for bit the fp32 launch's result on the rounded start, rounded once. Row scales
// (random, zeros, negatives) against the twin's scaled sums; a scale of 1 on every row gives the unscaled bits.
#define SG_SIMT_EMULATION 1
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "core/strings.h"
#include "gpu_test_util.h"  // bf16 conversions only: nothing here touches a GPU
#include "kernels/column_sums.cuh"
#include "kernels/column_sums_case.h"

namespace sg {
namespace {

using test::ColumnSumsCase;
using test::ColumnSumsShape;

const ColumnSumsShape kShapes[] = {
    {0, 7, 7},             // nothing added
    {1, 7, 7},             // one row, a partial column block
    {1, 8, 8},             // one row, 16-byte path
    {5, 33, 40},           // strided, two column blocks of the scalar path
    {37, 1000, 1000},      // 16-byte path, four column blocks (the last partial)
    {37, 1000, 1003},      // the same width, scalar path
    {300, 24, 24, true},   // skewed rows
    {3000, 40, 40},        // more rows than slots (1024), 16-byte path
    {9000, 16, 16},        // 8 or 9 rows a slot: the 4-row loads and the remainder, 16-byte path
    {5000, 33, 35, true},  // 4 or 5 rows a slot, scalar path, skewed
    // Row scales: zero rows, fewer rows than a block's 8 slots, rows not a multiple of the slots (1024 beyond 1024).
    {0, 16, 16, false, true},
    {3, 7, 7, false, true},
    {37, 1000, 1000, false, true},
    {300, 24, 24, true, true},
    {3001, 40, 40, false, true},
    {5000, 33, 35, true, true},
    {9000, 16, 16, false, true},  // the 4-row loads scaled, 16-byte path
};

std::vector<float> run(const ColumnSumsCase& c, const std::vector<bf16>& in, int64_t stride, const float* row_scale) {
  std::vector<float> dst = c.dst0, scratch(c.scratch_floats(), NAN);
  kernels::colsums::run_column_sums(emu::Launch{}, c.params(dst.data(), scratch.data(), in.data(), row_scale, stride));
  return dst;
}
std::vector<float> run(const ColumnSumsCase& c, const std::vector<bf16>& in, int64_t stride) {
  return run(c, in, stride, c.host_row_scale());
}

class ColumnSumsEmulated : public ::testing::TestWithParam<ColumnSumsShape> {};

TEST_P(ColumnSumsEmulated, MatchesReference) {
  const ColumnSumsCase c = test::make_column_sums_case(GetParam());
  test::expect_column_sums(c, run(c, c.in, c.row_stride()));
}

TEST_P(ColumnSumsEmulated, BitsDoNotDependOnTheLayout) {
  const ColumnSumsCase c = test::make_column_sums_case(GetParam());
  const std::vector<float> first = run(c, c.in, c.row_stride());
  // An odd stride (the scalar path) and a wider multiple of 8 (the 16-byte path where cols % 8 == 0).
  for (const int64_t stride : {c.s.cols + 1, (c.s.cols + 15) / 8 * 8}) {
    const std::vector<bf16> in = c.with_stride(stride);
    const bool vector =
        kernels::colsums::vector_path(c.params(kernels::FloatBuffer{}, nullptr, in.data(), nullptr, stride));
    EXPECT_EQ(vector, stride % 8 == 0 && c.s.cols % 8 == 0) << "stride " << stride;
    EXPECT_TRUE(test::bitwise_equal(run(c, in, stride), first)) << "stride " << stride;
  }
}

TEST_P(ColumnSumsEmulated, IntoBf16GradientRoundsTheFp32SumOnce) {
  const ColumnSumsCase c = test::make_column_sums_case(GetParam());
  const std::vector<float> start = test::round_bf16(c.dst0);
  std::vector<float> dst32 = start, scratch(c.scratch_floats(), NAN);
  std::vector<bf16> dst16 = test::to_bf16(start);
  const emu::Launch launch;
  kernels::colsums::run_column_sums(launch, c.params(dst32.data(), scratch.data(), c.in.data(), c.host_row_scale()));
  kernels::colsums::run_column_sums(launch, c.params(dst16.data(), scratch.data(), c.in.data(), c.host_row_scale()));
  EXPECT_TRUE(test::bitwise_equal(test::to_float(dst16), test::round_bf16(dst32)));
  if (c.s.rows > 0) {
    EXPECT_NE(test::to_float(dst16), start) << "nothing was added";
  }
}

// A scale of 1 on every row: the bits of the launch without row_scale (the multiply by 1 is exact).
TEST_P(ColumnSumsEmulated, UnitRowScalesGiveTheUnscaledBits) {
  const ColumnSumsCase c = test::make_column_sums_case(GetParam());
  const std::vector<float> ones(static_cast<size_t>(c.s.rows), 1.0f);
  EXPECT_TRUE(test::bitwise_equal(run(c, c.in, c.row_stride(), ones.data()), run(c, c.in, c.row_stride(), nullptr)));
}

INSTANTIATE_TEST_SUITE_P(Shapes, ColumnSumsEmulated, ::testing::ValuesIn(kShapes), [](const auto& info) {
  const ColumnSumsShape& s = info.param;
  return strprintf("rows%lld_cols%lld_stride%lld%s%s", static_cast<long long>(s.rows), static_cast<long long>(s.cols),
                   static_cast<long long>(s.stride), s.skewed ? "_skewed" : "", s.scaled ? "_scaled" : "");
});

TEST(ColumnSumsEmulatedMisc, PartialRowsAreAFunctionOfRowsCappedAt128) {
  const std::pair<int64_t, int64_t> expected[] = {{0, 0},      {1, 1},      {8, 1},      {9, 2},
                                                  {1024, 128}, {1025, 128}, {65536, 128}};
  for (const auto& [rows, partials] : expected) {
    EXPECT_EQ(kernels::colsums::num_partials(rows), partials) << "rows " << rows;
    EXPECT_EQ(kernels::column_sums_num_partials(rows), partials) << "rows " << rows;
    EXPECT_EQ(kernels::column_sums_scratch_bytes(rows, 1152), static_cast<size_t>(partials * 1152 * 4));
  }
}

TEST(ColumnSumsEmulatedMisc, RejectsBadParamsNamingTheField) {
  std::vector<bf16> in(64);
  std::vector<float> dst(8), scratch(8);
  const kernels::ColumnSumsParams good{
      .dst = dst.data(), .scratch = scratch.data(), .scratch_bytes = 32, .in = in.data(), .rows = 4, .cols = 8};
  test::expect_bad_column_sums_params_named(good, [](const kernels::ColumnSumsParams& p) {
    return test::thrown_message([&] { kernels::colsums::run_column_sums(emu::Launch{}, p); });
  });
}

}  // namespace
}  // namespace sg
