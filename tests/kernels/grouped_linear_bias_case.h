#pragma once
// One test case of the grouped linears' per-group biases (kernels/grouped_linear_bias.h), shared by the GPU test and
// the CPU-emulated test: a routing (per-group row counts and segment offsets in the layouts the MoE layer produces:
// dropless back to back, token drop at capacity strides with unused rows, empty groups first, middle and last, all
// rows on one group, skewed), bf16 rows y0 and dy, a bf16 bias per group, a random fp32 start of the bias gradient,
// and the CPU twin's results (reference/grouped_gemm: grouped_bias_forward, grouped_bias_backward in double).
// Rows outside every segment hold NaN in dy (a sum that reads one fails; unless the case asks for values there) and
// must keep y0's bits in y.
// Checks:
//   forward:  every segment row bit for bit the twin's fp32 sum rounded to bf16 (one fp32 add and one rounding on
//             both sides); every other row bit for bit y0.
//   backward: |got - ref| <= kGroupedBiasTol (|dst0| + sum over the group's rows |dy|) per element, kGroupedBiasTol =
//             1e-5: fp32 sums of at most 32 rows a slot, 8 slots, the group's partial rows in order (at most
//             max_rows / 256 + 1) and the add into dst stay within (32 + 8 + 257 + 1) 2^-24 = 1.8e-5 of that scale
//             for the largest case here (65536 rows); an empty group's row keeps dst0's bits.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <ostream>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "gpu_test_util.h"
#include "kernel_gpu_test_util.h"
#include "kernels/grouped_linear_bias.h"
#include "reference/grouped_gemm.h"
#include "test_util.h"

namespace sg::test {

inline constexpr double kGroupedBiasTol = 1e-5;

struct GroupedBiasShape {
  std::string name;
  int64_t cols;
  std::vector<int32_t> counts, offsets;
  int64_t max_rows;
};

inline void PrintTo(const GroupedBiasShape& s, std::ostream* os) {
  *os << s.name << " cols=" << s.cols;
}

// Segments back to back from row 0, then `unused` rows past the last (the dropless buffer's rows are exactly theirs).
inline GroupedBiasShape packed_groups(std::string name, int64_t cols, std::vector<int32_t> counts, int64_t unused = 0) {
  GroupedBiasShape s{std::move(name), cols, std::move(counts), {}, 0};
  for (int32_t c : s.counts) {
    s.offsets.push_back(static_cast<int32_t>(s.max_rows));
    s.max_rows += c;
  }
  s.max_rows += unused;
  return s;
}

// Token drop padded to capacity: group g's segment starts at g * cap; rows past its count are unused.
inline GroupedBiasShape capacity_groups(std::string name, int64_t cols, int32_t cap, std::vector<int32_t> counts) {
  GroupedBiasShape s{std::move(name), cols, std::move(counts), {}, 0};
  for (size_t g = 0; g < s.counts.size(); ++g) s.offsets.push_back(static_cast<int32_t>(g) * cap);
  s.max_rows = static_cast<int64_t>(s.counts.size()) * cap;
  return s;
}

// `groups` groups with random counts in [0, max_count], about a fifth empty.
inline GroupedBiasShape random_groups(std::string name, int64_t cols, int groups, int max_count, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> count(0, max_count);
  std::vector<int32_t> counts(static_cast<size_t>(groups));
  for (auto& c : counts) c = count(gen) < max_count / 5 ? 0 : count(gen);
  return packed_groups(std::move(name), cols, std::move(counts));
}

struct GroupedBiasCase {
  GroupedBiasShape s;
  std::vector<bf16> y0, bias, dy;
  std::vector<float> dst0;
  std::vector<float> y_ref;      // [max_rows, cols]: the twin's fp32 rows (y0 outside the segments)
  std::vector<float> dbias_ref;  // [groups, cols]
  std::vector<double> dbias_scale;
  std::vector<bool> in_segment;  // [max_rows]

  int groups() const { return static_cast<int>(s.counts.size()); }
  ref::GroupedRows rows() const { return {s.counts.data(), s.offsets.data(), groups(), s.max_rows}; }
  size_t scratch_bytes() const { return kernels::grouped_bias_scratch_bytes(s.max_rows, groups(), s.cols); }
};

// nan_outside: the rows outside every segment hold NaN in dy (false: random values, as in the segments). The
// values depend on max_rows, cols and the group count only, so two routings of those sizes share them.
inline GroupedBiasCase make_grouped_bias_case(const GroupedBiasShape& shape, bool nan_outside = true) {
  GroupedBiasCase c;
  c.s = shape;
  const int64_t R = shape.max_rows, C = shape.cols, G = c.groups();
  const uint64_t seed = static_cast<uint64_t>(R * 131 + C * 7 + G);
  c.in_segment.assign(static_cast<size_t>(R), false);
  for (int g = 0; g < G; ++g)
    for (int64_t r = shape.offsets[g]; r < shape.offsets[g] + shape.counts[g]; ++r) c.in_segment[r] = true;
  std::vector<float> y = round_bf16(random_normal(static_cast<size_t>(R * C), seed + 1));
  std::vector<float> dy = round_bf16(random_normal(static_cast<size_t>(R * C), seed + 2));
  const std::vector<float> bias = round_bf16(random_normal(static_cast<size_t>(G * C), seed + 3, 0.5f));
  for (int64_t r = 0; r < R && nan_outside; ++r)
    if (!c.in_segment[r])
      for (int64_t k = 0; k < C; ++k) dy[r * C + k] = NAN;
  c.y0 = to_bf16(y);
  c.dy = to_bf16(dy);
  c.bias = to_bf16(bias);
  c.dst0 = random_normal(static_cast<size_t>(G * C), seed + 4);
  c.y_ref = y;
  ref::grouped_bias_forward(c.y_ref.data(), bias.data(), c.rows(), C);
  c.dbias_ref = c.dst0;
  ref::grouped_bias_backward(c.dbias_ref.data(), dy.data(), c.rows(), C);
  c.dbias_scale.resize(static_cast<size_t>(G * C));
  for (int g = 0; g < G; ++g) {
    for (int64_t k = 0; k < C; ++k) {
      double scale = std::fabs(static_cast<double>(c.dst0[g * C + k]));
      for (int64_t r = shape.offsets[g]; r < shape.offsets[g] + shape.counts[g]; ++r) scale += std::fabs(dy[r * C + k]);
      c.dbias_scale[g * C + k] = scale;
    }
  }
  return c;
}

inline void expect_grouped_bias_forward(const GroupedBiasCase& c, const std::vector<bf16>& got) {
  const int64_t C = c.s.cols;
  const std::vector<bf16> want_in = to_bf16(c.y_ref);
  int64_t wrong = 0;
  for (int64_t r = 0; r < c.s.max_rows; ++r) {
    const std::vector<bf16>& want = c.in_segment[r] ? want_in : c.y0;
    for (int64_t k = 0; k < C; ++k) {
      const size_t i = static_cast<size_t>(r * C + k);
      if (std::memcmp(&got[i], &want[i], sizeof(bf16)) == 0) continue;
      if (++wrong <= 3) {
        ADD_FAILURE() << c.s.name << ": y[" << r << ", " << k << "] = " << to_float({got[i]})[0] << ", expected "
                      << to_float({want[i]})[0] << (c.in_segment[r] ? " (y0 + bias)" : " (y0: outside every group)");
      }
    }
  }
  EXPECT_EQ(wrong, 0) << c.s.name << ": forward elements not bit for bit the twin's";
}

inline void expect_grouped_bias_backward(const GroupedBiasCase& c, const std::vector<float>& got) {
  const int64_t C = c.s.cols;
  int64_t far = 0;
  for (int g = 0; g < c.groups(); ++g) {
    for (int64_t k = 0; k < C; ++k) {
      const size_t i = static_cast<size_t>(g * C + k);
      const bool ok = c.s.counts[g] == 0 ? std::memcmp(&got[i], &c.dst0[i], sizeof(float)) == 0
                                         : std::fabs(static_cast<double>(got[i]) - c.dbias_ref[i]) <=
                                               kGroupedBiasTol * c.dbias_scale[i];
      if (ok) continue;
      if (++far <= 3) {
        ADD_FAILURE() << c.s.name << ": dbias[" << g << ", " << k << "] = " << got[i] << ", twin " << c.dbias_ref[i]
                      << " (group rows " << c.s.counts[g] << ", start " << c.dst0[i] << ")";
      }
    }
  }
  EXPECT_EQ(far, 0) << c.s.name << ": bias gradient elements outside the tolerance";
}

}  // namespace sg::test
