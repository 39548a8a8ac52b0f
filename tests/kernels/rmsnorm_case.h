#pragma once
// One RMSNorm backward test case, shared by the GPU test and the CPU-emulated test: bf16-rounded x, weight,
// dout and dresidual, random starting dweight (the kernel ADDS into it), the rstd and fp32 results of the
// reference (reference/rmsnorm), the launcher parameters over any storage, and the checks of a run.
// Skewed cases scale the rows of x over six decades (1e-3 .. 1e3) and make every 37th column of x and
// dout 30x larger, so the per-row dot product and the column sums mix very different magnitudes.
// Tolerances: din (bf16) relative error < kBf16RelTol (1e-2) vs the fp32 reference; dweight (fp32, from
// identical inputs, added into random starting values) < kFp32RelTol (1e-5).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "gpu_test_util.h"  // bf16 conversions
#include "kernels/rmsnorm.h"
#include "reference/rmsnorm.h"
#include "test_util.h"

namespace sg::test {

struct RmsNormShape {
  int64_t T, H;
  bool skewed = false;
};

struct RmsNormBackwardCase {
  static constexpr float kEps = 1e-5f;
  RmsNormShape s;
  std::vector<bf16> x, weight, dout, dresidual;
  std::vector<float> rstd, dweight0;
  std::vector<float> din_ref, din_with_residual_ref, dweight_ref;

  size_t scratch_bytes() const { return kernels::rmsnorm_backward_scratch_bytes(s.T, s.H); }

  kernels::RmsNormBackwardParams backward(bf16* din, float* dw, float* scratch, const bf16* dout_, const bf16* in,
                                          const bf16* w, const float* rstd_, const bf16* dres) const {
    return {.din = din, .dweight = dw, .scratch = scratch, .scratch_bytes = scratch_bytes(), .dout = dout_,
            .in = in, .weight = w, .rstd = rstd_, .dresidual = dres, .T = s.T, .H = s.H};
  }
};

inline RmsNormBackwardCase make_rmsnorm_backward_case(const RmsNormShape& s) {
  const uint64_t seed = static_cast<uint64_t>(s.T * 7919 + s.H * 31 + (s.skewed ? 1 : 0));
  RmsNormBackwardCase c;
  c.s = s;
  auto x = random_normal(s.T * s.H, seed + 1, 2.0f);
  auto dy = random_normal(s.T * s.H, seed + 2);
  if (s.skewed) {
    for (int64_t t = 0; t < s.T; ++t) {
      const float row_scale = std::pow(10.0f, static_cast<float>(t % 7) - 3.0f);
      for (int64_t h = 0; h < s.H; ++h) {
        const float col_scale = h % 37 == 0 ? 30.0f : 1.0f;
        x[t * s.H + h] *= row_scale * col_scale;
        dy[t * s.H + h] *= col_scale;
      }
    }
  }
  x = round_bf16(x);
  dy = round_bf16(dy);
  const auto dres = round_bf16(random_normal(s.T * s.H, seed + 3));
  auto w = random_normal(s.H, seed + 4, 0.2f);
  for (auto& v : w) v += 1.0f;
  w = round_bf16(w);
  c.dweight0 = random_normal(s.H, seed + 5);
  c.x = to_bf16(x);
  c.weight = to_bf16(w);
  c.dout = to_bf16(dy);
  c.dresidual = to_bf16(dres);

  std::vector<float> y(s.T * s.H);
  c.rstd.resize(s.T);
  ref::rmsnorm_forward(y.data(), c.rstd.data(), x.data(), w.data(), s.T, s.H, RmsNormBackwardCase::kEps);
  c.din_ref.resize(s.T * s.H);
  c.dweight_ref = c.dweight0;
  ref::rmsnorm_backward(c.din_ref.data(), c.dweight_ref.data(), dy.data(), x.data(), w.data(), c.rstd.data(), s.T,
                        s.H);
  c.din_with_residual_ref = c.din_ref;
  for (int64_t i = 0; i < s.T * s.H; ++i) c.din_with_residual_ref[i] += dres[i];
  return c;
}

// v moved one element on (out[i + 1] = v[i]): a host copy whose device image is 16-byte misaligned.
inline std::vector<bf16> shifted_by_one(const std::vector<bf16>& v) {
  std::vector<bf16> out(v.size() + 1, v.empty() ? bf16{} : v[0]);
  std::copy(v.begin(), v.end(), out.begin() + 1);
  return out;
}

// din / dweight of a run with (with_residual) or without the fused dresidual add.
inline void expect_rmsnorm_backward_results(const RmsNormBackwardCase& c, const std::vector<bf16>& din,
                                            const std::vector<float>& dweight, bool with_residual) {
  const auto& din_ref = with_residual ? c.din_with_residual_ref : c.din_ref;
  EXPECT_LT(relative_error(to_float(din), din_ref), kBf16RelTol)
      << "din, T=" << c.s.T << " H=" << c.s.H << (with_residual ? " with dresidual" : "");
  EXPECT_LT(relative_error(dweight, c.dweight_ref), kFp32RelTol) << "dweight, T=" << c.s.T << " H=" << c.s.H;
}

}  // namespace sg::test
