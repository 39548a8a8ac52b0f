#pragma once
// One column_sums test case (the bias gradient dst[c] += sum_r in[r, c], or with row scales the gate weight gradient
// dst[c] += sum_r row_scale[r] in[r, c]), shared by the GPU test and the CPU-emulated test: bf16 input rows of
// `stride` elements (NaN in the columns past `cols`, so a read outside the view poisons the result), normal values
// scaled by 2^-8 .. 2^8 in a fixed pattern (bf16 values of one magnitude mostly sum exactly in fp32, and a change of
// summation order would not show in the bits), optionally skewed (every 97th row 1000x larger), optionally scaled
// (random normal fp32 row scales, every 5th row's 0, about half negative), a random fp32 start of dst, the fp32
// twin's result (reference/column_sums: sums in double), the launcher parameters over any storage, and the check.
// Tolerance: |got[c] - ref[c]| <= kColumnSumsTol * (|dst0[c]| + sum_r |row_scale[r] in[r, c]|) for every column,
// kColumnSumsTol = 1e-5: fp32 sums of at most ~90 sequential adds per column (64 rows of a slot at 65536 rows, 8
// slots, the partial rows' reduction, the add into dst), plus one rounded product per term when scaled, stay within
// 91 * 2^-24 = 5.4e-6 of that scale. With zero rows dst keeps its bits.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "gpu_test_util.h"
#include "kernel_gpu_test_util.h"
#include "kernels/column_sums.h"
#include "reference/column_sums.h"
#include "test_util.h"

namespace sg::test {

inline constexpr double kColumnSumsTol = 1e-5;

struct ColumnSumsShape {
  int64_t rows, cols, stride;
  bool skewed = false;  // every 97th row (from row 3) 1000x larger
  bool scaled = false;  // row_scale set (random, with zeros and negatives)
};

inline void PrintTo(const ColumnSumsShape& s, std::ostream* os) {
  *os << "rows=" << s.rows << " cols=" << s.cols << " stride=" << s.stride << (s.skewed ? " skewed" : "")
      << (s.scaled ? " scaled" : "");
}

struct ColumnSumsCase {
  ColumnSumsShape s;
  std::vector<float> in_f;  // [rows, stride]: the bf16-rounded values, NaN past cols
  std::vector<bf16> in;     // the same in bf16
  std::vector<float> row_scale;  // [rows] when s.scaled, else empty
  std::vector<float> dst0, dst_ref;
  std::vector<double> scale;  // |dst0[c]| + sum_r |row_scale[r] in[r, c]|

  int64_t row_stride() const { return s.stride == s.cols ? 0 : s.stride; }  // packed rows passed as 0
  size_t scratch_bytes() const { return kernels::column_sums_scratch_bytes(s.rows, s.cols); }
  size_t scratch_floats() const { return scratch_bytes() / sizeof(float); }

  // row_scale_: this case's row scales in the launcher's memory (null when !s.scaled).
  kernels::ColumnSumsParams params(kernels::FloatBuffer dst, float* scratch, const bf16* in_, const float* row_scale_,
                                   int64_t stride = -1) const {
    if (stride < 0) stride = row_stride();
    return {.dst = dst,
            .scratch = scratch,
            .scratch_bytes = scratch_bytes(),
            .in = in_,
            .rows = s.rows,
            .cols = s.cols,
            .row_stride = stride,
            .row_scale = row_scale_};
  }
  // The row scales in host memory for an emulated launch: null when the case is not scaled.
  const float* host_row_scale() const { return s.scaled ? row_scale.data() : nullptr; }

  // The same matrix in rows of `stride` >= cols elements (NaN past cols).
  std::vector<bf16> with_stride(int64_t stride) const {
    std::vector<float> out(static_cast<size_t>(s.rows * stride), NAN);
    for (int64_t r = 0; r < s.rows; ++r)
      for (int64_t c = 0; c < s.cols; ++c) out[r * stride + c] = in_f[r * s.stride + c];
    return to_bf16(out);
  }
};

inline ColumnSumsCase make_column_sums_case(const ColumnSumsShape& s, bool keep_float_input = true) {
  const uint64_t seed =
      static_cast<uint64_t>(s.rows * 131 + s.cols * 7 + s.stride) + (s.skewed ? 1000003 : 0) + (s.scaled ? 2000003 : 0);
  ColumnSumsCase c;
  c.s = s;
  std::vector<float> in = random_normal(static_cast<size_t>(s.rows * s.stride), seed + 1);
  for (int64_t r = 0; r < s.rows; ++r) {
    for (int64_t col = 0; col < s.stride; ++col) {
      float& v = in[r * s.stride + col];
      if (col >= s.cols) {
        v = NAN;
        continue;
      }
      v = std::ldexp(v, static_cast<int>((r * 7 + col * 13) % 17) - 8);
      if (s.skewed && r % 97 == 3) v *= 1000.0f;
    }
  }
  c.in = to_bf16(in);
  in = to_float(c.in);
  if (s.scaled) {
    c.row_scale = random_normal(static_cast<size_t>(s.rows), seed + 3);
    for (int64_t r = 2; r < s.rows; r += 5) c.row_scale[r] = 0.0f;
  }
  c.dst0 = random_normal(static_cast<size_t>(s.cols), seed + 2);
  c.dst_ref = c.dst0;
  ref::column_sums(c.dst_ref.data(), in.data(), s.rows, s.cols, s.stride, c.host_row_scale());
  c.scale.assign(s.cols, 0.0);
  for (int64_t col = 0; col < s.cols; ++col) c.scale[col] = std::fabs(static_cast<double>(c.dst0[col]));
  for (int64_t r = 0; r < s.rows; ++r) {
    const double row_scale = s.scaled ? std::fabs(static_cast<double>(c.row_scale[r])) : 1.0;
    for (int64_t col = 0; col < s.cols; ++col)
      c.scale[col] += row_scale * std::fabs(static_cast<double>(in[r * s.stride + col]));
  }
  if (keep_float_input) c.in_f = std::move(in);
  return c;
}

// Columns outside the tolerance (NaN included).
inline int64_t count_outside_tolerance(const ColumnSumsCase& c, const std::vector<float>& got) {
  if (got.size() != c.dst_ref.size()) return static_cast<int64_t>(c.dst_ref.size()) + 1;
  int64_t bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double err = std::fabs(static_cast<double>(got[i]) - c.dst_ref[i]);
    bad += !(err <= kColumnSumsTol * c.scale[i]);
  }
  return bad;
}

inline void expect_column_sums(const ColumnSumsCase& c, const std::vector<float>& got) {
  EXPECT_EQ(count_outside_tolerance(c, got), 0) << "columns outside " << kColumnSumsTol << " of |dst0| + sum |x|";
  if (c.s.rows == 0) {
    EXPECT_TRUE(got == c.dst0) << "rows == 0 changed dst";
  } else {
    EXPECT_FALSE(got == c.dst0) << "nothing was added";
  }
}

// The launcher's checks on a valid call `good` (rows 4, cols 8, a 32-byte scratch) made bad one field at a time:
// `message(p)` runs the launcher and returns what it threw ("" for nothing). Each error names the field; zero rows
// read neither `in` nor the scratch.
template <class Message>
void expect_bad_column_sums_params_named(const kernels::ColumnSumsParams& good, const Message& message) {
  EXPECT_EQ(message(good), "");
  const auto expect_named = [&](const kernels::ColumnSumsParams& p, const char* named) {
    const std::string m = message(p);
    EXPECT_NE(m.find(named), std::string::npos) << m;
  };
  auto p = good;
  p.row_stride = 7;
  expect_named(p, "row_stride = 7");
  p = good;
  p.scratch_bytes = 28;
  expect_named(p, "scratch of 28 bytes");
  p = good;
  p.scratch = nullptr;
  expect_named(p, "scratch");
  p = good;
  p.in = nullptr;
  expect_named(p, "in is null");
  p = good;
  p.dst = kernels::FloatBuffer{};
  expect_named(p, "dst.data is null");
  p = good;
  p.cols = 0;
  expect_named(p, "cols=0");
  p = good;
  p.rows = -1;
  expect_named(p, "rows=-1");
  p = good;
  p.rows = 0;
  p.scratch = nullptr;
  p.scratch_bytes = 0;
  p.in = nullptr;
  EXPECT_EQ(message(p), "") << "zero rows read neither in nor scratch";
}

}  // namespace sg::test
