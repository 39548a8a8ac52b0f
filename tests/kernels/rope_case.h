#pragma once
// One RoPE test case, shared by the GPU test and the CPU-emulated test: fused QKV-like rows
// [q heads | k heads | v heads | pad] of bf16-rounded random values, optionally starting `offset` elements
// into the buffer (unaligned x) and followed by kGuard elements (never empty, even at T = 0), the fp32
// reference results (reference/rope) and the checks of a run.
// The kernels work in place, so instead of poisoning outputs, everything outside the rotated heads (v, the
// row pad, the leading offset, the trailing guard) is NaN (0xFFFF) and must come back bit for bit; inside, the tiled kernel
// must equal the per-element kernel (rope_per_element.cuh, the algorithm it replaced) bit for bit, and the
// fp32 reference within kBf16RelTol (1e-2, relative error over the rotated elements). With partial rotary
// (rotary_dim) the dimensions of the q and k heads past rotary_dim must come back bit for bit too.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <ostream>
#include <string>
#include <vector>

#include "core/strings.h"
#include "gpu_test_util.h"
#include "kernels/rope.h"
#include "reference/rope.h"
#include "test_util.h"

namespace sg::test {

struct RopeShape {
  int64_t T, S, q_heads, kv_heads, head_dim;
  double base = 10000.0;
  int64_t pad = 0;                // elements after the v heads in every row (odd: row_stride % 8 != 0)
  int64_t offset = 0;             // elements before row 0 (not a multiple of 8: x not 16-byte aligned)
  bool device_positions = false;  // positions[t] random in [0, 131072) instead of t % S
  bool llama3 = false;            // Llama 3 frequency scaling (factor 32, original context 8192)
  int64_t rotary_dim = 0;         // partial rotary: the dimensions rotated at the start of each head; 0: all
  bool longrope = false;          // LongRoPE: a different factor per pair and attention factor 1.19 (Phi-3.5-mini's)
};

inline std::string rope_shape_name(const RopeShape& s) {
  return strprintf("T%lld_S%lld_q%lld_kv%lld_d%lld_pad%lld_off%lld%s%s%s%s", static_cast<long long>(s.T),
                   static_cast<long long>(s.S), static_cast<long long>(s.q_heads), static_cast<long long>(s.kv_heads),
                   static_cast<long long>(s.head_dim), static_cast<long long>(s.pad), static_cast<long long>(s.offset),
                   s.device_positions ? "_positions" : "", s.llama3 ? "_llama3" : "",
                   s.rotary_dim > 0 ? strprintf("_rotary%lld", static_cast<long long>(s.rotary_dim)).c_str() : "",
                   s.longrope ? "_longrope" : "");
}

// gtest prints a failing case's parameter by its name.
inline void PrintTo(const RopeShape& s, std::ostream* os) { *os << rope_shape_name(s); }

struct RopeCase {
  static constexpr int64_t kGuard = 8;
  RopeShape s;
  ref::RopeScaling scaling;
  std::vector<int32_t> positions;       // [T] when device_positions
  std::vector<bf16> input;              // offset + T * stride + kGuard elements
  std::vector<float> fwd_ref, bwd_ref;  // the reference over the rotated heads, dense [T, heads * head_dim]

  int64_t heads() const { return s.q_heads + s.kv_heads; }  // q and k are contiguous: one call rotates both
  int64_t stride() const { return (s.q_heads + 2 * s.kv_heads) * s.head_dim + s.pad; }
  int64_t rotated() const { return heads() * s.head_dim; }
  int64_t rotated_dims() const { return ref::rope_rotated_dims(s.head_dim, s.rotary_dim); }

  // Launcher parameters over a buffer laid out like `input` (device or host memory).
  kernels::RopeParams params(bf16* buffer, const int32_t* device_positions) const {
    kernels::RopeParams p{.x = buffer + s.offset,
                          .T = s.T,
                          .S = s.S,
                          .num_heads = heads(),
                          .head_dim = s.head_dim,
                          .rotary_dim = s.rotary_dim,
                          .row_stride = stride(),
                          .base = s.base};
    p.scaling = scaling;
    p.positions = s.device_positions ? device_positions : nullptr;
    return p;
  }

  // The cos/sin table for these params (rope_table_build), a few positions longer than S: a table serves
  // any S up to its length. Only for positions t % S.
  int64_t table_positions() const { return s.S + 3; }
  size_t table_floats() const { return static_cast<size_t>(table_positions() * rotated_dims()); }
  kernels::RopeTableParams table_params(float* storage) const {
    return {.cos_sin = storage,
            .positions = table_positions(),
            .head_dim = rotated_dims(),
            .base = s.base,
            .scaling = scaling};
  }

  // The rotated heads of a buffer laid out like `input`, as dense fp32 [T, heads * head_dim].
  std::vector<float> rotated_view(const std::vector<bf16>& buffer) const {
    std::vector<bf16> view(static_cast<size_t>(s.T * rotated()));
    for (int64_t t = 0; t < s.T; ++t)
      std::memcpy(static_cast<void*>(&view[t * rotated()]), &buffer[s.offset + t * stride()],
                  static_cast<size_t>(rotated()) * sizeof(bf16));
    return to_float(view);
  }
};

inline RopeCase make_rope_case(const RopeShape& s) {
  RopeCase c;
  c.s = s;
  if (s.llama3) c.scaling.factor = 32.0;
  if (s.longrope) {
    c.scaling.longrope_pairs = static_cast<int32_t>(c.rotated_dims() / 2);
    for (int i = 0; i < c.scaling.longrope_pairs; ++i)
      c.scaling.longrope_factors[i] = 1.0f + 0.37f * static_cast<float>(i);
    c.scaling.attention_factor = 1.1902380714238083;
  }
  const uint64_t seed = static_cast<uint64_t>(s.T * 1000003 + s.head_dim * 1009 + s.q_heads * 31 + s.kv_heads);
  if (s.device_positions) {
    const auto values = random_tokens(static_cast<size_t>(s.T), 131072, seed + 1);
    c.positions.assign(values.begin(), values.end());
  }
  std::vector<float> host(static_cast<size_t>(s.offset + s.T * c.stride() + RopeCase::kGuard), NAN);
  const auto values = round_bf16(random_normal(static_cast<size_t>(s.T * c.rotated()), seed + 2));
  for (int64_t t = 0; t < s.T; ++t)
    for (int64_t j = 0; j < c.rotated(); ++j) host[s.offset + t * c.stride() + j] = values[t * c.rotated() + j];
  c.input = to_bf16(host);
  const int32_t* pos = s.device_positions ? c.positions.data() : nullptr;
  auto fwd = host, bwd = host;
  ref::rope_forward(fwd.data() + s.offset, s.T, s.S, c.heads(), s.head_dim, c.stride(), s.base, c.scaling, pos,
                    s.rotary_dim);
  ref::rope_backward(bwd.data() + s.offset, s.T, s.S, c.heads(), s.head_dim, c.stride(), s.base, c.scaling, pos,
                     s.rotary_dim);
  c.fwd_ref = c.rotated_view(to_bf16(fwd));
  c.bwd_ref = c.rotated_view(to_bf16(bwd));
  return c;
}

// `got` (the tiled kernel's buffer after one forward or backward from c.input) against `per_element` (the
// per-element kernel's), the input outside the rotated heads and the reference.
inline void expect_rope_result(const RopeCase& c, const std::vector<bf16>& got, const std::vector<bf16>& per_element,
                               bool inverse) {
  const char* what = inverse ? "backward" : "forward";
  ASSERT_EQ(got.size(), c.input.size());
  ASSERT_EQ(per_element.size(), c.input.size());
  int64_t differ = 0, first_differ = -1, outside_changed = 0;
  for (size_t e = 0; e < got.size(); ++e) {
    if (std::memcmp(&got[e], &per_element[e], sizeof(bf16)) != 0) {
      if (differ++ == 0) first_differ = static_cast<int64_t>(e);
    }
    const int64_t rel = static_cast<int64_t>(e) - c.s.offset;
    const bool in_qk = rel >= 0 && rel < c.s.T * c.stride() && rel % c.stride() < c.rotated();
    const bool rotated = in_qk && rel % c.stride() % c.s.head_dim < c.rotated_dims();
    if (!rotated && std::memcmp(&got[e], &c.input[e], sizeof(bf16)) != 0) ++outside_changed;
  }
  EXPECT_EQ(differ, 0) << what << ": " << differ << " elements differ in bits from the per-element kernel, first at "
                       << first_differ;
  EXPECT_EQ(outside_changed, 0) << what
                                << ": elements outside the rotated dimensions of the q and k heads were written";
  if (c.s.T > 0) {
    EXPECT_LT(relative_error(c.rotated_view(got), inverse ? c.bwd_ref : c.fwd_ref), kBf16RelTol) << what;
  }
}

// A built table against ref::rope_cos_sin_table: every entry within one fp32 ulp (both round an fp64
// cos/sin of the same fp64 angle to fp32; the device's sincos is within 2 fp64 ulp, glibc's within 1, so
// the two roundings differ by at most one fp32 step).
inline void expect_table_near_reference(const RopeCase& c, const std::vector<float>& table) {
  std::vector<float> want(c.table_floats());
  ref::rope_cos_sin_table(want.data(), c.table_positions(), c.rotated_dims(), c.s.base, c.scaling);
  ASSERT_EQ(table.size(), want.size());
  int64_t off = 0, first = -1;
  for (size_t e = 0; e < want.size(); ++e) {
    const bool near = table[e] == want[e] || table[e] == std::nextafter(want[e], INFINITY) ||
                      table[e] == std::nextafter(want[e], -INFINITY);
    if (!near && off++ == 0) first = static_cast<int64_t>(e);
  }
  EXPECT_EQ(off, 0) << off << " table entries are more than one fp32 ulp from the reference, first at " << first << " ("
                    << (first >= 0 ? table[first] : 0.0f) << " vs " << (first >= 0 ? want[first] : 0.0f) << ")";
}

}  // namespace sg::test
