#pragma once
// Test cases of the Mamba2 decoding kernels (kernels/mamba_decode.h), shared by the GPU test and the
// CPU-emulated test. Each test file gives a runner that takes one call's host buffers, runs the kernel (the
// emulator: in place; the GPU: upload, launch, download) and leaves the results in the call's out / y and
// state; the scenarios here build the calls and check them against the CPU twins called per slot
// (ref::causal_conv1d_silu_forward_continued, ref::ssd_scan_forward_continued).
//
// Inputs: seeded random, bf16-rounded where the kernel reads bf16; non-zero starting states in every slot;
// the columns of an input row outside its view hold NaN (a read past the view shows); out / y start NaN.
// Tolerances:
//   out, y (bf16): |got - ref| <= 2^-8 |ref| + kOutAbsTol (1e-3) per element: the twin's fp32 value rounded
//     once to bf16 (half a step, 2^-9 relative, up to 2^-8 when fp32 noise moves it across a rounding
//     boundary), plus fp32 noise (fast exp in SiLU, the order of the scan's sum over dstate; ~1e-6 here).
//   conv state: exactly the twin's (the kept inputs are copied, not computed).
//   ssm state (fp32): |got - ref| <= kStateTol (1e-5) (|ref| + rms(ref)) per element: the same recurrence;
//     FMA contraction on the GPU differs by an ulp per step, which the decays keep from growing.
// Pieces: a slot fed a 20-row prefill then 3 decoding steps (of 4 slots each) must give the same out / y
// rows and state bits as the 23 rows in one call.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "gpu_test_util.h"         // bf16 conversions
#include "kernel_gpu_test_util.h"  // view_columns
#include "kernels/mamba_decode.h"
#include "reference/causal_conv1d.h"
#include "reference/ssd_scan.h"
#include "test_util.h"

namespace sg::test {

inline constexpr double kOutAbsTol = 1e-3;
inline constexpr double kStateTol = 1e-5;
inline constexpr int64_t kConvKept = ref::kCausalConv1dWidth - 1;

// Row t of a call belongs to slot first_slot + t / rows_per_slot.
struct SlotRows {
  int64_t T = 0, rows_per_slot = 1, first_slot = 0, slots = 0;
  int64_t sequences() const { return (T + rows_per_slot - 1) / rows_per_slot; }
};

// Calls fn(first_row, rows, slot) for each sequence of a call, as the decoder calls the twins.
inline void for_each_slot(const SlotRows& r, const std::function<void(int64_t, int64_t, int64_t)>& fn) {
  for (int64_t first = 0; first < r.T; first += r.rows_per_slot)
    fn(first, std::min(r.rows_per_slot, r.T - first), r.first_slot + first / r.rows_per_slot);
}

inline std::vector<bf16> nan_bf16(size_t n) {
  return to_bf16(std::vector<float>(n, NAN));
}

// `rows` x `stride` values: random normal (bf16-rounded) in columns [offset, offset + width), NaN elsewhere.
inline std::vector<float> view_rows(int64_t rows, int64_t stride, int64_t offset, int64_t width, uint64_t seed,
                                    float stddev = 1.0f) {
  const std::vector<float> v = round_bf16(random_normal(static_cast<size_t>(rows * width), seed, stddev));
  std::vector<float> out(static_cast<size_t>(rows * stride), NAN);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < width; ++c) out[r * stride + offset + c] = v[r * width + c];
  return out;
}

// Per-element bound of a bf16 result: 2^-8 |ref| + kOutAbsTol (NaN never passes).
inline void expect_bf16_near(const std::vector<bf16>& got, const std::vector<float>& ref, const std::string& what) {
  ASSERT_EQ(got.size(), ref.size()) << what;
  const std::vector<float> g = to_float(got);
  int64_t bad = 0, first = -1;
  for (size_t i = 0; i < g.size(); ++i) {
    const double bound = std::ldexp(std::fabs(static_cast<double>(ref[i])), -8) + kOutAbsTol;
    if (!(std::fabs(static_cast<double>(g[i]) - ref[i]) <= bound)) {
      if (bad++ == 0) first = static_cast<int64_t>(i);
    }
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << g.size() << " elements off; first at " << first << ": got "
                    << (first >= 0 ? g[first] : 0.0f) << ", reference " << (first >= 0 ? ref[first] : 0.0f);
}

// Per-element bound of an fp32 state: kStateTol (|ref| + rms(ref)).
inline void expect_state_near(const std::vector<float>& got, const std::vector<float>& ref, const std::string& what) {
  ASSERT_EQ(got.size(), ref.size()) << what;
  double sq = 0.0;
  for (float v : ref) sq += static_cast<double>(v) * v;
  const double rms = ref.empty() ? 0.0 : std::sqrt(sq / static_cast<double>(ref.size()));
  int64_t bad = 0, first = -1;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!(std::fabs(static_cast<double>(got[i]) - ref[i]) <= kStateTol * (std::fabs(ref[i]) + rms))) {
      if (bad++ == 0) first = static_cast<int64_t>(i);
    }
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << got.size() << " elements off; first at " << first << ": got "
                    << (first >= 0 ? got[first] : 0.0f) << ", reference " << (first >= 0 ? ref[first] : 0.0f);
}

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

// ---- conv ----

// `in` is the C columns at `offset` of rows of `stride` elements (stride == C: packed, passed as 0).
struct ConvDecodeShape {
  SlotRows rows;
  int64_t C = 0, stride = 0, offset = 0;
};

// gtest prints a failing case's shape with these (not its bytes).
inline void PrintTo(const SlotRows& r, std::ostream* os) {
  *os << "T=" << r.T << " rows_per_slot=" << r.rows_per_slot << " first_slot=" << r.first_slot << " slots=" << r.slots;
}
inline void PrintTo(const ConvDecodeShape& s, std::ostream* os) {
  PrintTo(s.rows, os);
  *os << " C=" << s.C << " stride=" << s.stride << " offset=" << s.offset;
}

// One conv call's host buffers; the runner writes out and state.
struct ConvCall {
  SlotRows rows;
  int64_t C = 0, in_row_stride = 0, in_offset = 0;  // in_row_stride as passed (0 = packed)
  const std::vector<bf16>& in;
  const std::vector<bf16>& weight;
  const std::vector<bf16>& bias;
  std::vector<bf16>& out;
  std::vector<bf16>& state;

  kernels::CausalConv1dContinuedParams params(bf16* out_, bf16* state_, const bf16* in_, const bf16* weight_,
                                              const bf16* bias_) const {
    return {.out = out_,
            .state = state_,
            .in = in_ + in_offset,
            .weight = weight_,
            .bias = bias_,
            .T = rows.T,
            .rows_per_slot = rows.rows_per_slot,
            .first_slot = rows.first_slot,
            .slots = rows.slots,
            .C = C,
            .in_row_stride = in_row_stride};
  }
};
using RunConv = std::function<void(const ConvCall&)>;

struct ConvDecodeCase {
  ConvDecodeShape s;
  std::vector<float> in_f, weight_f, bias_f, state_ref, out_ref;
  std::vector<bf16> in, weight, bias, state0;  // state0: [slots, C, 3], non-zero

  int64_t row_stride() const { return s.stride == s.C ? 0 : s.stride; }
  // A call on `in_` (rows of this case's stride and offset) with this case's weights.
  ConvCall call(const SlotRows& rows, const std::vector<bf16>& in_, std::vector<bf16>& out,
                std::vector<bf16>& state) const {
    return {.rows = rows,
            .C = s.C,
            .in_row_stride = row_stride(),
            .in_offset = s.offset,
            .in = in_,
            .weight = weight,
            .bias = bias,
            .out = out,
            .state = state};
  }
};

// The twin called per slot on rows of `in` ([T, stride], view at offset), from and into `state` [slots, C, 3].
inline void conv_reference(std::vector<float>& out, std::vector<float>& state, const std::vector<float>& in,
                           const std::vector<float>& weight, const std::vector<float>& bias, const SlotRows& rows,
                           int64_t C, int64_t stride, int64_t offset) {
  out.assign(static_cast<size_t>(rows.T * C), 0.0f);
  for_each_slot(rows, [&](int64_t first, int64_t n, int64_t slot) {
    ref::causal_conv1d_silu_forward_continued(out.data() + first * C, state.data() + slot * C * kConvKept,
                                              in.data() + first * stride + offset, stride, weight.data(), bias.data(),
                                              n, C);
  });
}

inline ConvDecodeCase make_conv_decode_case(const ConvDecodeShape& s, uint64_t seed) {
  ConvDecodeCase c;
  c.s = s;
  c.in_f = view_rows(s.rows.T, s.stride, s.offset, s.C, seed + 1);
  c.weight_f = round_bf16(random_normal(s.C * ref::kCausalConv1dWidth, seed + 2, 0.5f));
  c.bias_f = round_bf16(random_normal(s.C, seed + 3, 0.5f));
  c.state_ref = round_bf16(random_normal(s.rows.slots * s.C * kConvKept, seed + 4));
  c.in = to_bf16(c.in_f);
  c.weight = to_bf16(c.weight_f);
  c.bias = to_bf16(c.bias_f);
  c.state0 = to_bf16(c.state_ref);
  conv_reference(c.out_ref, c.state_ref, c.in_f, c.weight_f, c.bias_f, s.rows, s.C, s.stride, s.offset);
  return c;
}

inline void check_conv_case(const ConvDecodeShape& s, const RunConv& run) {
  const ConvDecodeCase c = make_conv_decode_case(s, 11 + s.rows.T * 101 + s.C);
  std::vector<bf16> out = nan_bf16(c.out_ref.size()), state = c.state0;
  run(c.call(s.rows, c.in, out, state));
  expect_bf16_near(out, c.out_ref, "out");
  EXPECT_EQ(to_float(state), c.state_ref) << "conv state (every slot: the call's updated, the others untouched)";
}

// Slot 2 of 4 fed 20 rows, then 3 decoding steps of all 4 slots, against the 23 rows in one call.
inline void check_conv_pieces(const RunConv& run) {
  constexpr int64_t kSlots = 4, kSlot = 2, kPrefill = 20, kSteps = 3, kWhole = kPrefill + kSteps;
  const ConvDecodeShape whole{{kWhole, kWhole, kSlot, kSlots}, 20, 29, 3};
  const ConvDecodeCase c = make_conv_decode_case(whole, 7);
  const int64_t C = whole.C, stride = whole.stride;
  std::vector<bf16> out_whole = nan_bf16(kWhole * C), state_whole = c.state0;
  run(c.call(whole.rows, c.in, out_whole, state_whole));
  expect_bf16_near(out_whole, c.out_ref, "out of the whole call");

  std::vector<bf16> state = c.state0, out_prefill = nan_bf16(kPrefill * C);
  run(c.call({kPrefill, kPrefill, kSlot, kSlots}, c.in, out_prefill, state));
  std::vector<bf16> pieces(out_prefill.begin(), out_prefill.end());
  for (int64_t k = 0; k < kSteps; ++k) {
    // One row per slot: slot kSlot's is row kPrefill + k of the whole sequence, the others random.
    std::vector<bf16> step_in = to_bf16(view_rows(kSlots, stride, whole.offset, C, 100 + k));
    std::copy_n(c.in.begin() + (kPrefill + k) * stride, stride, step_in.begin() + kSlot * stride);
    std::vector<bf16> step_out = nan_bf16(kSlots * C);
    run(c.call({kSlots, 1, 0, kSlots}, step_in, step_out, state));
    pieces.insert(pieces.end(), step_out.begin() + kSlot * C, step_out.begin() + (kSlot + 1) * C);
  }
  EXPECT_TRUE(same_bits(pieces, out_whole)) << "out of the slot fed in pieces differs from the whole call's";
  const auto slot_state = [&](const std::vector<bf16>& st) {
    return std::vector<bf16>(st.begin() + kSlot * C * kConvKept, st.begin() + (kSlot + 1) * C * kConvKept);
  };
  EXPECT_TRUE(same_bits(slot_state(state), slot_state(state_whole))) << "conv state after the pieces differs";
}

// T == 0: nothing written (out and every state keep their bits).
inline void check_conv_noop(const RunConv& run) {
  const ConvDecodeCase c = make_conv_decode_case({{3, 1, 0, 3}, 16, 16, 0}, 5);
  std::vector<bf16> out = nan_bf16(3 * 16), state = c.state0;
  const std::vector<bf16> out0 = out;
  run(c.call({0, 1, 0, 3}, c.in, out, state));
  EXPECT_TRUE(same_bits(out, out0)) << "out written by an empty call";
  EXPECT_TRUE(same_bits(state, c.state0)) << "state written by an empty call";
}

// ---- scan ----

// pad == 0: x, B, C packed (strides passed as 0); else their rows are pad, pad + 3 and pad + 7 elements
// wider than the data (NaN there), as slices of a wider row.
struct ScanDecodeShape {
  SlotRows rows;
  int64_t nheads = 0, headdim = 0, ngroups = 0, dstate = 0;
  int64_t pad = 0;
  bool with_D = true;
};

inline void PrintTo(const ScanDecodeShape& s, std::ostream* os) {
  PrintTo(s.rows, os);
  *os << " nheads=" << s.nheads << " headdim=" << s.headdim << " ngroups=" << s.ngroups << " dstate=" << s.dstate
      << " pad=" << s.pad << (s.with_D ? " D" : " no D");
}

struct ScanCall {
  SlotRows rows;
  int64_t nheads = 0, headdim = 0, ngroups = 0, dstate = 0;
  int64_t x_row_stride = 0, bm_row_stride = 0, cm_row_stride = 0;  // as passed (0 = packed)
  const std::vector<bf16>& x;
  const std::vector<float>& dt;
  const std::vector<float>& A;
  const std::vector<bf16>& Bm;
  const std::vector<bf16>& Cm;
  const std::vector<float>* D;  // nullptr: no skip
  std::vector<bf16>& y;
  std::vector<float>& state;

  kernels::SsdScanContinuedParams params(bf16* y_, float* state_, const bf16* x_, const float* dt_, const float* A_,
                                         const bf16* Bm_, const bf16* Cm_, const float* D_) const {
    return {.y = y_,
            .state = state_,
            .x = x_,
            .dt = dt_,
            .A = A_,
            .Bm = Bm_,
            .Cm = Cm_,
            .D = D_,
            .T = rows.T,
            .rows_per_slot = rows.rows_per_slot,
            .first_slot = rows.first_slot,
            .slots = rows.slots,
            .nheads = nheads,
            .headdim = headdim,
            .ngroups = ngroups,
            .dstate = dstate,
            .x_row_stride = x_row_stride,
            .bm_row_stride = bm_row_stride,
            .cm_row_stride = cm_row_stride};
  }
};
using RunScan = std::function<void(const ScanCall&)>;

struct ScanDecodeCase {
  ScanDecodeShape s;
  int64_t xs = 0, bs = 0, cs = 0;  // row strides of the buffers
  std::vector<float> x_f, B_f, C_f, dt, A, D, state_ref, y_ref;
  std::vector<bf16> x, Bm, Cm;
  std::vector<float> state0;  // [slots, H, P, N], non-zero

  int64_t passed(int64_t stride) const { return s.pad == 0 ? 0 : stride; }
  ScanCall call(const SlotRows& rows, const std::vector<bf16>& x_, const std::vector<float>& dt_,
                const std::vector<bf16>& B_, const std::vector<bf16>& C_, std::vector<bf16>& y,
                std::vector<float>& state) const {
    return {.rows = rows,
            .nheads = s.nheads,
            .headdim = s.headdim,
            .ngroups = s.ngroups,
            .dstate = s.dstate,
            .x_row_stride = passed(xs),
            .bm_row_stride = passed(bs),
            .cm_row_stride = passed(cs),
            .x = x_,
            .dt = dt_,
            .A = A,
            .Bm = B_,
            .Cm = C_,
            .D = s.with_D ? &D : nullptr,
            .y = y,
            .state = state};
  }
};

// Random inputs of `rows` rows: x, B, C in strided rows (NaN outside the data), dt in [0.01, 0.5].
inline void scan_inputs(const ScanDecodeCase& c, int64_t rows, uint64_t seed, std::vector<float>& x,
                        std::vector<float>& B, std::vector<float>& C, std::vector<float>& dt) {
  const ScanDecodeShape& s = c.s;
  x = view_rows(rows, c.xs, 0, s.nheads * s.headdim, seed + 1);
  B = view_rows(rows, c.bs, 0, s.ngroups * s.dstate, seed + 2, 0.5f);
  C = view_rows(rows, c.cs, 0, s.ngroups * s.dstate, seed + 3, 0.5f);
  std::mt19937_64 gen(seed + 4);
  std::uniform_real_distribution<float> udt(0.01f, 0.5f);
  dt.resize(static_cast<size_t>(rows * s.nheads));
  for (auto& v : dt) v = udt(gen);
}

// The twin called per slot (packed copies of each slot's rows), from and into `state`.
inline void scan_reference(std::vector<float>& y, std::vector<float>& state, const ScanDecodeCase& c,
                           const SlotRows& rows, const std::vector<float>& x, const std::vector<float>& B,
                           const std::vector<float>& C, const std::vector<float>& dt) {
  const ScanDecodeShape& s = c.s;
  const int64_t HP = s.nheads * s.headdim, GN = s.ngroups * s.dstate;
  y.assign(static_cast<size_t>(rows.T * HP), 0.0f);
  const std::vector<float> xp = view_columns(x, rows.T, c.xs, 0, HP), Bp = view_columns(B, rows.T, c.bs, 0, GN),
                           Cp = view_columns(C, rows.T, c.cs, 0, GN);
  for_each_slot(rows, [&](int64_t first, int64_t n, int64_t slot) {
    const ref::SsdScanShape piece{
        .batch = 1, .seqlen = n, .nheads = s.nheads, .headdim = s.headdim, .ngroups = s.ngroups, .dstate = s.dstate};
    ref::ssd_scan_forward_continued(y.data() + first * HP, state.data() + slot * HP * s.dstate, xp.data() + first * HP,
                                    dt.data() + first * s.nheads, c.A.data(), Bp.data() + first * GN,
                                    Cp.data() + first * GN, s.with_D ? c.D.data() : nullptr, piece);
  });
}

inline ScanDecodeCase make_scan_decode_case(const ScanDecodeShape& s, uint64_t seed) {
  ScanDecodeCase c;
  c.s = s;
  const int64_t HP = s.nheads * s.headdim, GN = s.ngroups * s.dstate;
  c.xs = HP + s.pad;
  c.bs = GN + (s.pad == 0 ? 0 : s.pad + 3);
  c.cs = GN + (s.pad == 0 ? 0 : s.pad + 7);
  scan_inputs(c, s.rows.T, seed, c.x_f, c.B_f, c.C_f, c.dt);
  std::mt19937_64 gen(seed + 5);
  std::uniform_real_distribution<float> ua(0.5f, 4.0f);
  c.A.resize(static_cast<size_t>(s.nheads));
  for (auto& v : c.A) v = -ua(gen);
  c.D = random_normal(s.nheads, seed + 6);
  c.state0 = random_normal(s.rows.slots * HP * s.dstate, seed + 7);
  c.x = to_bf16(c.x_f);
  c.Bm = to_bf16(c.B_f);
  c.Cm = to_bf16(c.C_f);
  c.state_ref = c.state0;
  scan_reference(c.y_ref, c.state_ref, c, s.rows, c.x_f, c.B_f, c.C_f, c.dt);
  return c;
}

inline void check_scan_case(const ScanDecodeShape& s, const RunScan& run) {
  const ScanDecodeCase c = make_scan_decode_case(s, 17 + s.rows.T * 31 + s.dstate);
  std::vector<bf16> y = nan_bf16(c.y_ref.size());
  std::vector<float> state = c.state0;
  run(c.call(s.rows, c.x, c.dt, c.Bm, c.Cm, y, state));
  expect_bf16_near(y, c.y_ref, "y");
  expect_state_near(state, c.state_ref, "ssm state (every slot: the call's updated, the others untouched)");
}

// Slot 2 of 4 fed 20 rows, then 3 decoding steps of all 4 slots, against the 23 rows in one call.
inline void check_scan_pieces(const ScanDecodeShape& shape, const RunScan& run) {
  constexpr int64_t kSlots = 4, kSlot = 2, kPrefill = 20, kSteps = 3, kWhole = kPrefill + kSteps;
  ScanDecodeShape s = shape;
  s.rows = {kWhole, kWhole, kSlot, kSlots};
  const ScanDecodeCase c = make_scan_decode_case(s, 3);
  const int64_t H = s.nheads, HP = H * s.headdim, N = s.dstate;
  std::vector<bf16> y_whole = nan_bf16(kWhole * HP);
  std::vector<float> state_whole = c.state0;
  run(c.call(s.rows, c.x, c.dt, c.Bm, c.Cm, y_whole, state_whole));
  expect_bf16_near(y_whole, c.y_ref, "y of the whole call");

  std::vector<float> state = c.state0;
  std::vector<bf16> y_prefill = nan_bf16(kPrefill * HP);
  run(c.call({kPrefill, kPrefill, kSlot, kSlots}, c.x, c.dt, c.Bm, c.Cm, y_prefill, state));
  std::vector<bf16> pieces(y_prefill.begin(), y_prefill.end());
  for (int64_t k = 0; k < kSteps; ++k) {
    // One row per slot: slot kSlot's is row kPrefill + k of the whole sequence, the others random.
    std::vector<float> xf, Bf, Cf, dt;
    scan_inputs(c, kSlots, 200 + k, xf, Bf, Cf, dt);
    std::vector<bf16> x = to_bf16(xf), B = to_bf16(Bf), C = to_bf16(Cf);
    const int64_t t = kPrefill + k;
    std::copy_n(c.x.begin() + t * c.xs, c.xs, x.begin() + kSlot * c.xs);
    std::copy_n(c.Bm.begin() + t * c.bs, c.bs, B.begin() + kSlot * c.bs);
    std::copy_n(c.Cm.begin() + t * c.cs, c.cs, C.begin() + kSlot * c.cs);
    std::copy_n(c.dt.begin() + t * H, H, dt.begin() + kSlot * H);
    std::vector<bf16> y = nan_bf16(kSlots * HP);
    run(c.call({kSlots, 1, 0, kSlots}, x, dt, B, C, y, state));
    pieces.insert(pieces.end(), y.begin() + kSlot * HP, y.begin() + (kSlot + 1) * HP);
  }
  EXPECT_TRUE(same_bits(pieces, y_whole)) << "y of the slot fed in pieces differs from the whole call's";
  const auto slot_state = [&](const std::vector<float>& st) {
    return std::vector<float>(st.begin() + kSlot * HP * N, st.begin() + (kSlot + 1) * HP * N);
  };
  EXPECT_TRUE(same_bits(slot_state(state), slot_state(state_whole))) << "ssm state after the pieces differs";
}

// T == 0: nothing written (y and every state keep their bits).
inline void check_scan_noop(const RunScan& run) {
  const ScanDecodeCase c = make_scan_decode_case({{2, 1, 0, 2}, 2, 64, 1, 16}, 9);
  std::vector<bf16> y = nan_bf16(c.y_ref.size());
  std::vector<float> state = c.state0;
  const std::vector<bf16> y0 = y;
  run(c.call({0, 1, 0, 2}, c.x, c.dt, c.Bm, c.Cm, y, state));
  EXPECT_TRUE(same_bits(y, y0)) << "y written by an empty call";
  EXPECT_TRUE(same_bits(state, c.state0)) << "state written by an empty call";
}

// ---- parameter checks ----

// Each bad parameter throws an sg::Error naming it. conv / scan launch valid-looking params whose pointers
// are non-null dummies (the checks run before any memory is read).
inline void check_bad_params(const std::function<void(const kernels::CausalConv1dContinuedParams&)>& conv,
                             const std::function<void(const kernels::SsdScanContinuedParams&)>& scan, bf16* b,
                             float* f) {
  using Conv = kernels::CausalConv1dContinuedParams;
  using Scan = kernels::SsdScanContinuedParams;
  const Conv cp{.out = b,
                .state = b,
                .in = b,
                .weight = b,
                .bias = b,
                .T = 1,
                .rows_per_slot = 1,
                .first_slot = 3,
                .slots = 4,
                .C = 16};
  const Scan sp{.y = b,
                .state = f,
                .x = b,
                .dt = f,
                .A = f,
                .Bm = b,
                .Cm = b,
                .T = 2,
                .rows_per_slot = 2,
                .first_slot = 0,
                .slots = 1,
                .nheads = 4,
                .headdim = 64,
                .ngroups = 2,
                .dstate = 16};
  const auto conv_error = [&](Conv p) { return thrown_message([&] { conv(p); }); };
  const auto scan_error = [&](Scan p) { return thrown_message([&] { scan(p); }); };
  const auto names = [](const std::string& message, const char* field) {
    return message.find(field) != std::string::npos;
  };
  Conv c = cp;
  c.first_slot = 4;
  EXPECT_TRUE(names(conv_error(c), "first_slot = 4")) << conv_error(c);
  c = cp;
  c.rows_per_slot = 0;
  EXPECT_TRUE(names(conv_error(c), "rows_per_slot = 0")) << conv_error(c);
  c = cp;
  c.in_row_stride = 15;
  EXPECT_TRUE(names(conv_error(c), "in_row_stride = 15")) << conv_error(c);
  c = cp;
  c.C = 0;
  EXPECT_TRUE(names(conv_error(c), "C = 0")) << conv_error(c);
  c = cp;
  c.bias = nullptr;
  EXPECT_TRUE(names(conv_error(c), "bias is null")) << conv_error(c);
  c = cp;
  c.T = 2;  // two sequences from slot 3 of 4
  EXPECT_TRUE(names(conv_error(c), "first_slot = 3")) << conv_error(c);

  Scan s = sp;
  s.first_slot = 1;
  EXPECT_TRUE(names(scan_error(s), "first_slot = 1")) << scan_error(s);
  s = sp;
  s.first_slot = -1;
  EXPECT_TRUE(names(scan_error(s), "first_slot = -1")) << scan_error(s);
  s = sp;
  s.dstate = 48;
  EXPECT_TRUE(names(scan_error(s), "dstate = 48")) << scan_error(s);
  s = sp;
  s.headdim = 129;
  EXPECT_TRUE(names(scan_error(s), "headdim = 129")) << scan_error(s);
  s = sp;
  s.ngroups = 3;
  EXPECT_TRUE(names(scan_error(s), "ngroups = 3")) << scan_error(s);
  s = sp;
  s.bm_row_stride = 31;
  EXPECT_TRUE(names(scan_error(s), "bm_row_stride = 31")) << scan_error(s);
  s = sp;
  s.A = nullptr;
  EXPECT_TRUE(names(scan_error(s), "A is null")) << scan_error(s);
  s = sp;
  s.T = -1;
  EXPECT_TRUE(names(scan_error(s), "T = -1")) << scan_error(s);
}

}  // namespace sg::test
