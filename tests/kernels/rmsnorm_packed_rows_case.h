#pragma once
// One test case of RMSNorm over packed rows (packed rows, kernels/rmsnorm.h: qk_layernorm's query or key
// heads inside the [tokens, qkv_dim] projection), shared by the GPU test and the CPU-emulated tests. The
// buffers x and dout hold per_group rows of H side by side in every packed row of group_stride elements,
// starting `offset` elements in (the key heads follow the query heads), with other values between (the rest
// of the projection). The references are reference/rmsnorm on the rows gathered contiguous.
// Checks: the rows as rmsnorm_case.h's tolerances (bf16 outputs < kBf16RelTol, fp32 < kFp32RelTol); every
// element outside the rows bitwise untouched; in place (out == in, din == dout) bitwise the separate result.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "gpu_test_util.h"  // bf16 conversions
#include "kernels/rmsnorm.h"
#include "reference/rmsnorm.h"
#include "test_util.h"

namespace sg::test {

struct PackedRowsShape {
  int64_t tokens, per_group, H, group_stride, offset;
  bool skewed = false;  // rows over six decades of magnitude (1e-3 .. 1e3)
};

struct PackedRowsCase {
  static constexpr float kEps = 1e-6f;  // Qwen3's rms_norm_eps
  PackedRowsShape s;
  std::vector<bf16> x, dout, weight;                           // x, dout: whole packed buffers
  std::vector<float> dweight0;                                 // the kernel ADDS into dweight
  std::vector<float> out_ref, rstd_ref, din_ref, dweight_ref;  // of the gathered rows
  // rstd storage: rows() values, at least one (the kernels take no null pointer, even for no rows)
  std::vector<float> rstd_buffer() const { return std::vector<float>(std::max<size_t>(rstd_ref.size(), 1), NAN); }
  // The reference's rstd as the backward's input, in such storage.
  std::vector<float> rstd_input() const {
    std::vector<float> r = rstd_ref;
    r.resize(std::max<size_t>(r.size(), 1), 0.0f);
    return r;
  }

  int64_t rows() const { return s.tokens * s.per_group; }
  int64_t elements() const { return s.offset + s.tokens * s.group_stride; }
  int64_t at(int64_t r) const { return s.offset + (r / s.per_group) * s.group_stride + (r % s.per_group) * s.H; }
  size_t scratch_bytes() const { return kernels::rmsnorm_backward_scratch_bytes(rows(), s.H); }

  // Parameters over any storage of the packed buffers (their element 0; the offset is added here).
  kernels::RmsNormForwardParams forward(bf16* out, float* rstd, const bf16* in, const bf16* w) const {
    return {.out = out + s.offset,
            .rstd = rstd,
            .in = in + s.offset,
            .weight = w,
            .T = rows(),
            .H = s.H,
            .eps = kEps,
            .rows_per_group = s.per_group,
            .group_stride = s.group_stride};
  }
  kernels::RmsNormBackwardParams backward(bf16* din, float* dw, float* scratch, const bf16* dout_, const bf16* in,
                                          const bf16* w, const float* rstd) const {
    return {.din = din + s.offset,
            .dweight = dw,
            .scratch = scratch,
            .scratch_bytes = scratch_bytes(),
            .dout = dout_ + s.offset,
            .in = in + s.offset,
            .weight = w,
            .rstd = rstd,
            .T = rows(),
            .H = s.H,
            .rows_per_group = s.per_group,
            .group_stride = s.group_stride};
  }

  // The rows of a packed buffer, one after another.
  std::vector<float> gather(const std::vector<bf16>& packed) const {
    const std::vector<float> all = to_float(packed);
    std::vector<float> out(static_cast<size_t>(rows() * s.H));
    for (int64_t r = 0; r < rows(); ++r)
      for (int64_t h = 0; h < s.H; ++h) out[r * s.H + h] = all[at(r) + h];
    return out;
  }
  // Whether a and b have the same bits everywhere outside the rows.
  bool same_outside_rows(const std::vector<bf16>& a, const std::vector<bf16>& b) const {
    std::vector<bool> in_row(static_cast<size_t>(elements()), false);
    for (int64_t r = 0; r < rows(); ++r)
      for (int64_t h = 0; h < s.H; ++h) in_row[at(r) + h] = true;
    for (int64_t i = 0; i < elements(); ++i)
      if (!in_row[i] && std::memcmp(&a[i], &b[i], sizeof(bf16)) != 0) return false;
    return true;
  }
};

inline PackedRowsCase make_packed_rows_case(const PackedRowsShape& s) {
  PackedRowsCase c;
  c.s = s;
  const uint64_t seed = static_cast<uint64_t>(s.tokens * 131 + s.per_group * 17 + s.H * 3 + s.offset);
  auto x = random_normal(c.elements(), seed + 1, 2.0f);
  if (s.skewed) {
    for (int64_t r = 0; r < c.rows(); ++r)
      for (int64_t h = 0; h < s.H; ++h) x[c.at(r) + h] *= std::pow(10.0f, static_cast<float>(r % 7) - 3.0f);
  }
  c.x = to_bf16(round_bf16(x));
  c.dout = to_bf16(round_bf16(random_normal(c.elements(), seed + 2)));
  auto w = random_normal(s.H, seed + 3, 0.2f);
  for (auto& v : w) v += 1.0f;
  c.weight = to_bf16(round_bf16(w));
  c.dweight0 = random_normal(s.H, seed + 4);

  const auto xr = c.gather(c.x), dyr = c.gather(c.dout), wf = to_float(c.weight);
  c.out_ref.resize(xr.size());
  c.rstd_ref.resize(static_cast<size_t>(c.rows()));
  ref::rmsnorm_forward(c.out_ref.data(), c.rstd_ref.data(), xr.data(), wf.data(), c.rows(), s.H, PackedRowsCase::kEps);
  c.din_ref.resize(xr.size());
  c.dweight_ref = c.dweight0;
  ref::rmsnorm_backward(c.din_ref.data(), c.dweight_ref.data(), dyr.data(), xr.data(), wf.data(), c.rstd_ref.data(),
                        c.rows(), s.H);
  return c;
}

// A forward's results: `out` started as `before` (poison, or x itself in place).
inline void expect_packed_forward(const PackedRowsCase& c, const std::vector<bf16>& out, const std::vector<float>& rstd,
                                  const std::vector<bf16>& before) {
  EXPECT_LT(relative_error(c.gather(out), c.out_ref), kBf16RelTol) << "out";
  const std::vector<float> rows_rstd(rstd.begin(), rstd.begin() + static_cast<int64_t>(c.rstd_ref.size()));
  EXPECT_LT(relative_error(rows_rstd, c.rstd_ref), kFp32RelTol) << "rstd";
  EXPECT_TRUE(c.same_outside_rows(out, before)) << "the forward wrote outside its rows";
}

// A backward's results: `din` started as `before`.
inline void expect_packed_backward(const PackedRowsCase& c, const std::vector<bf16>& din,
                                   const std::vector<float>& dweight, const std::vector<bf16>& before) {
  EXPECT_LT(relative_error(c.gather(din), c.din_ref), kBf16RelTol) << "din";
  EXPECT_LT(relative_error(dweight, c.dweight_ref), kFp32RelTol) << "dweight";
  EXPECT_TRUE(c.same_outside_rows(din, before)) << "the backward wrote outside its rows";
}

// Query heads (offset 0) and key heads (after 4 query heads) of qkv projections; the forward and backward
// paths: warp rows (64, 128), block rows (1032), scalars (H = 100, or a group_stride not a multiple of 8);
// more rows than the backward's 264 partial rows (280); no tokens.
inline const std::vector<PackedRowsShape>& packed_rows_shapes() {
  static const std::vector<PackedRowsShape> shapes = {
      {5, 4, 64, 512, 0},         // 4 query heads of 64; qkv_dim (4 + 2 x 2) x 64
      {5, 2, 64, 512, 256},       // the 2 key heads of the same projection
      {3, 3, 128, 640, 0, true},  // skewed magnitudes
      {4, 2, 100, 400, 200},      // H % 8 != 0: scalars
      {3, 4, 64, 260, 0},         // stride % 8 != 0: scalars
      {2, 2, 1032, 4128, 0},      // block per row (vectors)
      {70, 4, 64, 384, 0},        // 280 rows: a partial row's second pass in the backward
      {0, 4, 64, 512, 256},       // no tokens: nothing written
  };
  return shapes;
}

inline std::string packed_rows_name(const PackedRowsShape& s) {
  return "tokens" + std::to_string(s.tokens) + "_x" + std::to_string(s.per_group) + "_H" + std::to_string(s.H) +
         "_stride" + std::to_string(s.group_stride) + "_at" + std::to_string(s.offset) + (s.skewed ? "_skewed" : "");
}

}  // namespace sg::test
