#pragma once
// One dt = clamp(softplus(dt_raw + dt_bias)) test case, shared by the GPU test and the CPU-emulated test:
// bf16-rounded dt_raw in in_proj-like rows (the H-wide dt view at column `offset` of rows of `stride`
// elements), fp32 dt_bias and ddt, the fp32 reference results (reference/mamba_dt), the launcher
// parameters over any storage, and the checks of a run's outputs.
// Tolerances: fp32 outputs from identical inputs (dt, ddt_bias added into random starting values) relative
// error < kFp32RelTol (1e-5); bf16 ddt_raw < kBf16RelTol (1e-2). The ddt_raw rows start NaN inside the view
// and hold a sentinel outside it; every dt lies within the limit.
#include <gtest/gtest.h>

#include <limits>
#include <vector>

#include "kernel_gpu_test_util.h"
#include "kernels/mamba_dt.h"
#include "reference/mamba_dt.h"
#include "test_util.h"

namespace sg::test {

struct DtShape {
  int64_t T, H, stride, offset;
  float dt_min = 0.0f, dt_max = std::numeric_limits<float>::infinity();
};

struct DtCase {
  static constexpr float kSentinel = -3.0f;
  DtShape s;
  std::vector<bf16> rows, draw_poisoned;
  std::vector<float> bias, ddt, dbias0;
  std::vector<float> dt_ref, draw_ref, dbias_ref;

  int64_t row_stride() const { return s.stride == s.H ? 0 : s.stride; }  // packed rows passed as 0
  size_t scratch_bytes() const { return kernels::mamba_dt_backward_scratch_bytes(s.T, s.H); }

  kernels::MambaDtForwardParams forward(float* dt, const bf16* rows_base, const float* bias_) const {
    return {.dt = dt, .dt_raw = rows_base + s.offset, .dt_bias = bias_, .T = s.T, .H = s.H,
            .dt_raw_row_stride = row_stride(), .dt_min = s.dt_min, .dt_max = s.dt_max};
  }
  kernels::MambaDtBackwardParams backward(bf16* draw_base, kernels::FloatBuffer dbias, float* scratch,
                                          const float* ddt_, const bf16* rows_base, const float* bias_) const {
    return {.ddt_raw = draw_base + s.offset, .ddt_bias = dbias, .scratch = scratch, .scratch_bytes = scratch_bytes(),
            .ddt = ddt_, .dt_raw = rows_base + s.offset, .dt_bias = bias_, .T = s.T, .H = s.H,
            .dt_raw_row_stride = row_stride(), .ddt_raw_row_stride = row_stride(), .dt_min = s.dt_min,
            .dt_max = s.dt_max};
  }
};

inline DtCase make_dt_case(const DtShape& s) {
  const uint64_t seed = static_cast<uint64_t>(s.T * 131 + s.H);
  DtCase c;
  c.s = s;
  const auto rows = round_bf16(random_normal(s.T * s.stride, seed + 1, 2.0f));
  c.rows = to_bf16(rows);
  c.bias = random_normal(s.H, seed + 2);
  for (auto& b : c.bias) b -= 3.0f;  // softplus(bias) ~ 0.05: dt's usual scale
  c.ddt = random_normal(s.T * s.H, seed + 3);
  c.dbias0 = random_normal(s.H, seed + 4);
  c.draw_poisoned = poisoned_view_rows(s.T, s.stride, s.offset, s.H, DtCase::kSentinel);
  c.dt_ref.resize(s.T * s.H);
  c.dbias_ref = c.dbias0;
  std::vector<float> draw_rows(s.T * s.stride, 0.0f);
  ref::mamba_dt_forward(c.dt_ref.data(), rows.data() + s.offset, s.stride, c.bias.data(), s.T, s.H, s.dt_min,
                        s.dt_max);
  ref::mamba_dt_backward(draw_rows.data() + s.offset, s.stride, c.dbias_ref.data(), c.ddt.data(),
                         rows.data() + s.offset, s.stride, c.bias.data(), s.T, s.H, s.dt_min, s.dt_max);
  c.draw_ref = view_columns(draw_rows, s.T, s.stride, s.offset, s.H);
  return c;
}

inline void expect_dt_results(const DtCase& c, const std::vector<float>& dt, const std::vector<bf16>& draw_rows,
                              const std::vector<float>& dbias) {
  const DtShape& s = c.s;
  EXPECT_LT(relative_error(dt, c.dt_ref), kFp32RelTol) << "dt";
  EXPECT_LT(relative_error(to_float(view_columns(draw_rows, s.T, s.stride, s.offset, s.H)), c.draw_ref), kBf16RelTol)
      << "ddt_raw";
  EXPECT_EQ(count_changed_outside_view(draw_rows, s.T, s.stride, s.offset, s.H, DtCase::kSentinel), 0)
      << "ddt_raw written outside its view";
  EXPECT_LT(relative_error(dbias, c.dbias_ref), kFp32RelTol) << "ddt_bias";
  int64_t outside = 0;
  for (float v : dt) outside += !(v >= s.dt_min && v <= s.dt_max);
  EXPECT_EQ(outside, 0) << "dt values outside dt_limit (or NaN)";
}

}  // namespace sg::test
