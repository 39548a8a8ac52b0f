#pragma once
// One causal conv1d + SiLU test case, shared by the GPU test and the CPU-emulated test: bf16-rounded inputs
// laid out in in_proj-like rows (the C-wide xBC view at column `offset` of rows of `stride` elements), the
// fp32 reference results (reference/causal_conv1d), the launcher parameters over any storage, and the
// checks of a run's outputs.
// Tolerances: bf16 outputs (out, din) relative error < kBf16RelTol (1e-2) vs the fp32 reference; fp32
// weight gradients computed from identical inputs (dweight, dbias, added into random starting values)
// < kFp32RelTol (1e-5); the din rows start NaN inside the view (every element must be written) and hold a
// sentinel outside it (no element may be written).
#include <gtest/gtest.h>

#include <vector>

#include "kernel_gpu_test_util.h"
#include "kernels/causal_conv1d.h"
#include "reference/causal_conv1d.h"
#include "test_util.h"

namespace sg::test {

struct Conv1dShape {
  int64_t B, S, C, stride, offset;
};

struct Conv1dCase {
  static constexpr float kSentinel = 7.0f;
  static constexpr int64_t W = kernels::kCausalConv1dWidth;
  Conv1dShape s;
  std::vector<bf16> rows, weight, bias, dout, din_poisoned;
  std::vector<float> dweight0, dbias0;  // the main-grads' starting values (the backward adds)
  std::vector<float> out_ref, din_ref, dweight_ref, dbias_ref;

  int64_t tokens() const { return s.B * s.S; }
  int64_t row_stride() const { return s.stride == s.C ? 0 : s.stride; }  // packed rows passed as 0
  size_t scratch_bytes() const { return kernels::causal_conv1d_backward_scratch_bytes(s.B, s.S, s.C); }

  kernels::CausalConv1dForwardParams forward(bf16* out, const bf16* rows_base, const bf16* w, const bf16* b) const {
    return {.out = out, .in = rows_base + s.offset, .weight = w, .bias = b, .B = s.B, .S = s.S, .C = s.C,
            .in_row_stride = row_stride()};
  }
  kernels::CausalConv1dBackwardParams backward(bf16* din_base, float* dw, float* db, float* scratch,
                                               const bf16* dout_, const bf16* rows_base, const bf16* w,
                                               const bf16* b) const {
    return {.din = din_base + s.offset, .dweight = dw, .dbias = db, .scratch = scratch,
            .scratch_bytes = scratch_bytes(), .dout = dout_, .in = rows_base + s.offset, .weight = w, .bias = b,
            .B = s.B, .S = s.S, .C = s.C, .in_row_stride = row_stride(), .din_row_stride = row_stride()};
  }
};

inline Conv1dCase make_conv1d_case(const Conv1dShape& s) {
  const int64_t W = Conv1dCase::W, T = s.B * s.S;
  const uint64_t seed = static_cast<uint64_t>(s.B * 1000003 + s.S * 1009 + s.C);
  Conv1dCase c;
  c.s = s;
  const auto rows = round_bf16(random_normal(T * s.stride, seed + 1));
  const auto w = round_bf16(random_normal(s.C * W, seed + 2, 0.5f));
  const auto bias = round_bf16(random_normal(s.C, seed + 3, 0.5f));
  const auto dout = round_bf16(random_normal(T * s.C, seed + 4));
  c.dweight0 = random_normal(s.C * W, seed + 5);
  c.dbias0 = random_normal(s.C, seed + 6);
  c.rows = to_bf16(rows);
  c.weight = to_bf16(w);
  c.bias = to_bf16(bias);
  c.dout = to_bf16(dout);
  c.din_poisoned = poisoned_view_rows(T, s.stride, s.offset, s.C, Conv1dCase::kSentinel);
  c.out_ref.resize(T * s.C);
  std::vector<float> din_rows(T * s.stride, 0.0f);
  c.dweight_ref = c.dweight0;
  c.dbias_ref = c.dbias0;
  ref::causal_conv1d_silu_forward(c.out_ref.data(), rows.data() + s.offset, s.stride, w.data(), bias.data(), s.B, s.S,
                                  s.C);
  ref::causal_conv1d_silu_backward(din_rows.data() + s.offset, s.stride, c.dweight_ref.data(), c.dbias_ref.data(),
                                   dout.data(), rows.data() + s.offset, s.stride, w.data(), bias.data(), s.B, s.S,
                                   s.C);
  c.din_ref = view_columns(din_rows, T, s.stride, s.offset, s.C);
  return c;
}

inline void expect_conv1d_results(const Conv1dCase& c, const std::vector<bf16>& out, const std::vector<bf16>& din_rows,
                                  const std::vector<float>& dweight, const std::vector<float>& dbias) {
  const Conv1dShape& s = c.s;
  EXPECT_LT(relative_error(to_float(out), c.out_ref), kBf16RelTol) << "out";
  EXPECT_LT(relative_error(to_float(view_columns(din_rows, c.tokens(), s.stride, s.offset, s.C)), c.din_ref),
            kBf16RelTol)
      << "din";
  EXPECT_EQ(count_changed_outside_view(din_rows, c.tokens(), s.stride, s.offset, s.C, Conv1dCase::kSentinel), 0)
      << "din written outside its view";
  EXPECT_LT(relative_error(dweight, c.dweight_ref), kFp32RelTol) << "dweight";
  EXPECT_LT(relative_error(dbias, c.dbias_ref), kFp32RelTol) << "dbias";
}

}  // namespace sg::test
