#pragma once
// One moe_shared_gate test case (the MoE shared expert's sigmoid gate, kernels/moe_shared_gate.h), shared by the GPU
// test and the CPU-emulated test: random bf16 inputs (the normed input n ~ N(0, 1), every 7th token from token 3 8x
// larger so its gate saturates; the gate weight w ~ N(0, 4 / H), logits ~ N(0, 4); shared, dy ~ N(0, 1)), non-zero
// starts of the accumulated outputs (out, d_input, and the fp32 weight gradient), the CPU twin's results
// (reference/moe_shared_gate: double sums; its backward runs on its own fp32 gate, which the kernel tests feed to the
// kernels' backward too, so a saturated gate's 1 - g is the same on both sides), and the checks.
// Tolerances (tol = kSharedGateFp32Tol = 1e-5; L[t] = sum_h |n w|, D[t] = sum_h |dy s|, g = the twin's gate):
//   gate[t]:    |got - ref| <= tol (g + g (1 - g) L[t])     (the logit's fp32 sum error moves g by g (1 - g) dlogit)
//   d_logit[t]: |got - ref| <= tol (|ref| + g (1 - g) D[t])  =: dl_tol[t]
//     fp32 sums of at most ~40 terms per thread (H up to ~8192: 4 chunks of 8) plus the block's 8-level tree stay
//     within 50 * 2^-24 = 3e-6 of L or D; the IEEE expf and division add a few ulp of g.
//   bf16 out, d_shared, d_input: |got - ref| <= 2^-8 |ref| (half a bf16 step) + the fp32 error carried in (gate error
//     times |s|, dl_tol[t] |w|, 1e-6 of the summands), and at most 1% (at least 1) not the bf16 value nearest the
//     twin's: a kernel that rounds the product to bf16 before the add would miss about a quarter.
//   d_weight[h] (fp32, column_sums with row_scale = d_logit): |got - ref| <= 2e-5 (|dw0| + sum_t dl_tol[t] / tol |n|).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "gpu_test_util.h"
#include "kernels/moe_shared_gate.h"
#include "reference/moe_shared_gate.h"
#include "test_util.h"

namespace sg::test {

// `v` after `offset` leading zero elements: with offset 1, one element past its allocation's alignment (the kernels'
// unaligned paths); without_offset gives `v` back.
template <class T>
std::vector<T> with_offset(const std::vector<T>& v, int64_t offset) {
  std::vector<T> out(static_cast<size_t>(offset) + v.size());
  std::copy(v.begin(), v.end(), out.begin() + offset);
  return out;
}
template <class T>
std::vector<T> without_offset(const std::vector<T>& v, int64_t offset) {
  return std::vector<T>(v.begin() + offset, v.end());
}

inline constexpr double kSharedGateFp32Tol = 1e-5;
inline constexpr double kSharedGateWeightGradTol = 2e-5;
inline constexpr double kBf16HalfStep = 1.0 / 256;  // half a bf16 step, relative to the value (8 significant bits)

struct MoeSharedGateShape {
  int64_t T, H;
};

inline void PrintTo(const MoeSharedGateShape& s, std::ostream* os) {
  *os << "T=" << s.T << " H=" << s.H;
}

struct MoeSharedGateCase {
  MoeSharedGateShape s;
  std::vector<bf16> shared, input, weight, dy, out0, d_input0;  // bf16 inputs and accumulate starts
  std::vector<float> d_weight0;                                 // fp32 weight gradient start
  std::vector<float> out_ref, gate_ref, d_shared_ref, d_logit_ref, d_input_ref, d_weight_ref;
  std::vector<double> gate_tol, d_logit_tol, d_weight_tol;    // absolute, per token / column
  std::vector<float> shared_f, weight_f, d_input0_f, out0_f;  // the widened values the slack terms need
};

// What a launch sequence (forward, backward on the twin's gate, input grad, column_sums for d_weight) produced.
struct MoeSharedGateOutputs {
  std::vector<bf16> out, d_shared, d_input;
  std::vector<float> gate, d_logit, d_weight;
};

inline bool bitwise_equal_outputs(const MoeSharedGateOutputs& a, const MoeSharedGateOutputs& b) {
  const auto same = [](const auto& x, const auto& y) {
    return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(x[0])) == 0;
  };
  return same(a.out, b.out) && same(a.d_shared, b.d_shared) && same(a.d_input, b.d_input) && same(a.gate, b.gate) &&
         same(a.d_logit, b.d_logit) && same(a.d_weight, b.d_weight);
}

inline MoeSharedGateCase make_moe_shared_gate_case(const MoeSharedGateShape& s) {
  const int64_t T = s.T, H = s.H;
  const size_t n = static_cast<size_t>(T * H);
  const uint64_t seed = static_cast<uint64_t>(T * 7919 + H * 31);
  MoeSharedGateCase c;
  c.s = s;
  std::vector<float> input = random_normal(n, seed + 1);
  for (int64_t t = 3; t < T; t += 7)
    for (int64_t h = 0; h < H; ++h) input[t * H + h] *= 8.0f;
  c.input = to_bf16(input);
  c.weight = to_bf16(random_normal(static_cast<size_t>(H), seed + 2, 2.0f / std::sqrt(static_cast<float>(H))));
  c.shared = to_bf16(random_normal(n, seed + 3));
  c.dy = to_bf16(random_normal(n, seed + 4));
  c.out0 = to_bf16(random_normal(n, seed + 5));
  c.d_input0 = to_bf16(random_normal(n, seed + 6));
  c.d_weight0 = random_normal(static_cast<size_t>(H), seed + 7);
  input = to_float(c.input);
  c.weight_f = to_float(c.weight);
  c.shared_f = to_float(c.shared);
  c.out0_f = to_float(c.out0);
  c.d_input0_f = to_float(c.d_input0);
  const std::vector<float> dy = to_float(c.dy);

  c.out_ref = c.out0_f;
  c.gate_ref.assign(static_cast<size_t>(T), NAN);
  ref::moe_shared_gate_forward(c.out_ref.data(), c.gate_ref.data(), c.shared_f.data(), input.data(), c.weight_f.data(),
                               T, H);
  c.d_shared_ref.assign(n, NAN);
  c.d_logit_ref.assign(static_cast<size_t>(T), NAN);
  c.d_input_ref = c.d_input0_f;
  c.d_weight_ref = c.d_weight0;
  ref::moe_shared_gate_backward(c.d_shared_ref.data(), c.d_logit_ref.data(), c.d_input_ref.data(),
                                c.d_weight_ref.data(), dy.data(), c.shared_f.data(), input.data(), c.weight_f.data(),
                                c.gate_ref.data(), T, H);

  c.gate_tol.resize(static_cast<size_t>(T));
  c.d_logit_tol.resize(static_cast<size_t>(T));
  std::vector<double> dw_scale(static_cast<size_t>(H));
  for (int64_t h = 0; h < H; ++h) dw_scale[h] = std::fabs(static_cast<double>(c.d_weight0[h]));
  for (int64_t t = 0; t < T; ++t) {
    double L = 0.0, D = 0.0;
    for (int64_t h = 0; h < H; ++h) {
      L += std::fabs(static_cast<double>(input[t * H + h]) * c.weight_f[h]);
      D += std::fabs(static_cast<double>(dy[t * H + h]) * c.shared_f[t * H + h]);
    }
    const double g = c.gate_ref[t], slope = g * (1.0 - g);
    c.gate_tol[t] = kSharedGateFp32Tol * (g + slope * L);
    c.d_logit_tol[t] = kSharedGateFp32Tol * (std::fabs(static_cast<double>(c.d_logit_ref[t])) + slope * D);
    for (int64_t h = 0; h < H; ++h)
      dw_scale[h] += c.d_logit_tol[t] / kSharedGateFp32Tol * std::fabs(static_cast<double>(input[t * H + h]));
  }
  c.d_weight_tol.resize(static_cast<size_t>(H));
  for (int64_t h = 0; h < H; ++h) c.d_weight_tol[h] = kSharedGateWeightGradTol * dw_scale[h];
  return c;
}

// Elements of `got` farther than `tol(i)` from `ref` (NaN included); the first few are reported.
inline int64_t count_far(const char* what, const std::vector<float>& got, const std::vector<float>& ref,
                         const std::function<double(size_t)>& tol) {
  if (got.size() != ref.size()) {
    ADD_FAILURE() << what << ": " << got.size() << " values, expected " << ref.size();
    return static_cast<int64_t>(ref.size()) + 1;
  }
  int64_t far = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    const double err = std::fabs(static_cast<double>(got[i]) - ref[i]);
    if (err <= tol(i)) continue;
    if (++far <= 3) ADD_FAILURE() << what << "[" << i << "] = " << got[i] << ", twin " << ref[i] << ", tol " << tol(i);
  }
  return far;
}

// A bf16 result against the twin's: within half a bf16 step plus `slack(i)`, and mostly the nearest bf16 value.
inline void expect_bf16_result(const char* what, const std::vector<bf16>& got16, const std::vector<float>& ref,
                               const std::function<double(size_t)>& slack) {
  const std::vector<float> got = to_float(got16);
  EXPECT_EQ(count_far(what, got, ref,
                      [&](size_t i) { return kBf16HalfStep * std::fabs(static_cast<double>(ref[i])) + slack(i); }),
            0)
      << what;
  const int64_t misses = count_not_nearest_bf16(got, std::vector<double>(ref.begin(), ref.end()));
  EXPECT_LE(misses, allowed_bf16_order_misses(got.size())) << what << ": not the bf16 value nearest the twin's";
}

inline void expect_moe_shared_gate_matches_twin(const MoeSharedGateCase& c, const MoeSharedGateOutputs& got) {
  const int64_t H = c.s.H;
  const auto token = [H](size_t i) { return static_cast<int64_t>(i) / H; };
  const auto column = [H](size_t i) { return static_cast<int64_t>(i) % H; };
  const auto mag = [](float v) { return std::fabs(static_cast<double>(v)); };
  EXPECT_EQ(count_far("gate", got.gate, c.gate_ref, [&](size_t t) { return c.gate_tol[t]; }), 0);
  expect_bf16_result("out", got.out, c.out_ref, [&](size_t i) {
    return c.gate_tol[token(i)] * mag(c.shared_f[i]) + 1e-6 * (mag(c.out0_f[i]) + mag(c.shared_f[i]));
  });
  expect_bf16_result("d_shared", got.d_shared, c.d_shared_ref, [&](size_t i) { return 1e-6 * mag(c.d_shared_ref[i]); });
  EXPECT_EQ(count_far("d_logit", got.d_logit, c.d_logit_ref, [&](size_t t) { return c.d_logit_tol[t]; }), 0);
  expect_bf16_result("d_input", got.d_input, c.d_input_ref, [&](size_t i) {
    const double w = mag(c.weight_f[column(i)]);
    return c.d_logit_tol[token(i)] * w + 1e-6 * (mag(c.d_input0_f[i]) + mag(c.d_logit_ref[token(i)]) * w);
  });
  EXPECT_EQ(count_far("d_weight", got.d_weight, c.d_weight_ref, [&](size_t h) { return c.d_weight_tol[h]; }), 0);
  if (c.s.T > 0) {  // the accumulated outputs moved away from their non-zero starts
    EXPECT_NE(to_float(got.out), c.out0_f) << "nothing was added to out";
    EXPECT_NE(to_float(got.d_input), c.d_input0_f) << "nothing was added to d_input";
    EXPECT_NE(got.d_weight, c.d_weight0) << "nothing was added to d_weight";
  }
}

// The launchers' checks on valid calls (T = 4, H = 8) made bad one field at a time: `message(p)` runs the launcher
// for p's type and returns what it threw ("" for nothing). Each error names the launcher and the field; with T = 0
// only the [H] weight is read from params (the [T]-sized pointers may be null).
template <class Message>
void expect_bad_moe_shared_gate_params_named(const kernels::MoeSharedGateForwardParams& fwd,
                                             const kernels::MoeSharedGateBackwardParams& bwd,
                                             const kernels::MoeSharedGateInputGradParams& ig, const Message& message) {
  const auto expect_named = [&](const auto& p, const char* op, const std::string& named) {
    const std::string m = message(p);
    EXPECT_NE(m.find(op), std::string::npos) << m;
    EXPECT_NE(m.find(named), std::string::npos) << "want \"" << named << "\" in: " << m;
  };
  const auto expect_shape_checks = [&](const auto& good, const char* op) {
    EXPECT_EQ(message(good), "") << op;
    auto p = good;
    p.T = -1;
    expect_named(p, op, "T=-1");
    p = good;
    p.T = int64_t{1} << 31;
    expect_named(p, op, "T=2147483648");
    p = good;
    p.H = 0;
    expect_named(p, op, "H=0");
  };
  // `clear` sets one pointer of a copy of `good` to null; ": <field> is null" tells d_shared from shared.
  const auto expect_null_named = [&](auto p, const char* op, const char* field, const auto& clear) {
    clear(p);
    expect_named(p, op, std::string(": ") + field + " is null");
  };

  const char* op = "moe_shared_gate_forward";
  expect_shape_checks(fwd, op);
  expect_null_named(fwd, op, "out", [](auto& p) { p.out = nullptr; });
  expect_null_named(fwd, op, "gate", [](auto& p) { p.gate = nullptr; });
  expect_null_named(fwd, op, "shared", [](auto& p) { p.shared = nullptr; });
  expect_null_named(fwd, op, "input", [](auto& p) { p.input = nullptr; });
  expect_null_named(fwd, op, "weight", [](auto& p) { p.weight = nullptr; });
  const kernels::MoeSharedGateForwardParams empty_fwd{.weight = fwd.weight, .T = 0, .H = fwd.H};
  EXPECT_EQ(message(empty_fwd), "") << "T = 0 reads no [T]-sized buffer";
  expect_null_named(empty_fwd, op, "weight", [](auto& p) { p.weight = nullptr; });

  op = "moe_shared_gate_backward";
  expect_shape_checks(bwd, op);
  expect_null_named(bwd, op, "d_shared", [](auto& p) { p.d_shared = nullptr; });
  expect_null_named(bwd, op, "d_logit", [](auto& p) { p.d_logit = nullptr; });
  expect_null_named(bwd, op, "dy", [](auto& p) { p.dy = nullptr; });
  expect_null_named(bwd, op, "shared", [](auto& p) { p.shared = nullptr; });
  expect_null_named(bwd, op, "gate", [](auto& p) { p.gate = nullptr; });
  EXPECT_EQ(message(kernels::MoeSharedGateBackwardParams{.T = 0, .H = bwd.H}), "") << "T = 0 reads nothing";

  op = "moe_shared_gate_input_grad";
  expect_shape_checks(ig, op);
  expect_null_named(ig, op, "d_input", [](auto& p) { p.d_input = nullptr; });
  expect_null_named(ig, op, "d_logit", [](auto& p) { p.d_logit = nullptr; });
  expect_null_named(ig, op, "weight", [](auto& p) { p.weight = nullptr; });
  const kernels::MoeSharedGateInputGradParams empty_ig{.weight = ig.weight, .T = 0, .H = ig.H};
  EXPECT_EQ(message(empty_ig), "") << "T = 0 reads no [T]-sized buffer";
  expect_null_named(empty_ig, op, "weight", [](auto& p) { p.weight = nullptr; });
}

}  // namespace sg::test
