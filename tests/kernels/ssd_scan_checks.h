#pragma once
// The scan part of the SSD scan's y and dx (the skip term D x, D dy taken out), shared by the GPU test
// (ssd_scan_gpu_test.cu) and the CPU emulation of the same kernels (ssd_scan_emulated_test.cpp): the skip term is
// most of y and dx, so their 1e-2 tolerance barely sees the scan.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/ssd_scan.h"

namespace sg::test {

// bf16 outputs of bf16 tensor-core products (the decayed intra-chunk matrix, the passed states) differ from the fp32
// twin's scan part by 2.1e-3 .. 2.6e-3 in the emulation and 2.2e-3 .. 3.1e-3 on an H100 (the one-token shape the
// most), about 1.6e-3 of it the output's own bf16 rounding. In the emulation the inter-chunk term decayed from the
// previous position, or a 1.5x / doubled chunk decay, moves it to 5e-3 .. 6e-2; the backward's state term decayed
// from the previous position to 8e-3 .. 5e-2.
inline constexpr double kScanTol = 5e-3;

// with_skip minus D v (v = x for y, dy for dx; D per head), in double: the twin's scan part alone.
inline std::vector<float> minus_skip(const std::vector<float>& with_skip, const std::vector<float>& v,
                                     const std::vector<float>& D, const kernels::SsdShape& s) {
  std::vector<float> out(with_skip.size());
  for (size_t i = 0; i < out.size(); ++i) {
    out[i] = static_cast<float>(with_skip[i] - static_cast<double>(D[i / s.headdim % s.nheads]) * v[i]);
  }
  return out;
}

// ||got - D v - scan|| / ||scan||, each element's error first reduced by half a bf16 step of got: a correct kernel
// stores got = bf16(scan' + D v), rounded once, so what is left is its scan part's error scan' - scan.
inline double scan_part_error(const std::vector<float>& got, const std::vector<float>& v, const std::vector<float>& D,
                              const kernels::SsdShape& s, const std::vector<float>& scan) {
  if (got.size() != scan.size() || v.size() != scan.size()) return INFINITY;
  double num = 0.0, den = 0.0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!std::isfinite(got[i])) return INFINITY;
    const double half_step = got[i] == 0.0f ? 0.0 : std::ldexp(1.0, std::ilogb(got[i]) - 8);
    const double e = std::fabs(got[i] - static_cast<double>(D[i / s.headdim % s.nheads]) * v[i] - scan[i]);
    const double left = std::max(0.0, e - half_step);
    num += left * left;
    den += static_cast<double>(scan[i]) * scan[i];
  }
  return std::sqrt(num / den);
}

}  // namespace sg::test
