// The SSD scan's GPU kernels (src/kernels/ssd_scan_*.cuh), run on the CPU by tests/simt_emulator.h with the
// same launch sequence as the CUDA launchers, against the fp32 sequential twin (reference/ssd_scan.h).
// Catches indexing, fragment-layout and chunking mistakes without a GPU; the numbers differ from the GPU's
// only in fp32 summation order (and std::exp for __expf). Small shapes: the emulator is slow.
// Every shape runs with D ~ N(0, 1) and with D = nullptr (dD = nullptr too). Tolerances (relative L2 error):
//   with D: y, dx, dB, dC, ddt, dA < 1e-2 (bf16 operands and outputs); dD < 1e-4 (fp32 sums of the inputs).
//   The skip term D x is most of y (D dy of dx), so 1e-2 barely sees the scan: its part alone, y - D x and
//   dx - D dy, must be within kScanTol of the twin's, after forgiving each element half a bf16 step of its
//   stored value (its own rounding, mostly of the skip term).
//   without D: y, dx < kScanTol; ddt, dA, dB, dC the same bits as with D (D only enters the stores).
#define SG_SIMT_EMULATION 1
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <ostream>
#include <random>
#include <vector>

#include "core/strings.h"
#include "cuda/bf16.h"
#include "gpu_test_util.h"  // bf16 conversions only: nothing here touches a GPU
#include "kernels/ssd_scan_host.cuh"
#include "reference/ssd_scan.h"
#include "ssd_scan_checks.h"
#include "test_util.h"

namespace sg {
namespace {

using kernels::SsdShape;

using test::kScanTol;
using test::minus_skip;
using test::round_bf16;
using test::scan_part_error;
using test::to_bf16;
using test::to_float;

struct Case {
  SsdShape shape;
  float dt_max;                      // dt ~ U(0.001, dt_max)
  float a_min = 1.0f, a_max = 8.0f;  // A ~ -U(a_min, a_max); slow decay (a_max 0.5) carries state across chunks
};

struct Inputs {
  std::vector<float> x, Bm, Cm, dy, dt, A, D;
};

struct Outputs {
  std::vector<float> y, dx, dB, dC, ddt, dA, dD;
};

Inputs make_inputs(const Case& cs, uint64_t seed) {
  const SsdShape& s = cs.shape;
  const int64_t nx = s.batch * s.seqlen * s.nheads * s.headdim, nbc = s.batch * s.seqlen * s.ngroups * s.dstate;
  Inputs in;
  in.x = round_bf16(test::random_normal(nx, seed));
  in.Bm = round_bf16(test::random_normal(nbc, seed + 1, 0.5f));
  in.Cm = round_bf16(test::random_normal(nbc, seed + 2, 0.5f));
  in.dy = round_bf16(test::random_normal(nx, seed + 3));
  in.D = test::random_normal(s.nheads, seed + 4);
  std::mt19937_64 gen(seed + 5);
  std::uniform_real_distribution<float> udt(0.001f, cs.dt_max), ua(cs.a_min, cs.a_max);
  in.dt.resize(s.batch * s.seqlen * s.nheads);
  in.A.resize(s.nheads);
  for (auto& v : in.dt) v = udt(gen);
  for (auto& v : in.A) v = -ua(gen);
  return in;
}

Outputs run_reference(const SsdShape& s, const Inputs& in) {
  const int64_t nx = s.batch * s.seqlen * s.nheads * s.headdim, nbc = s.batch * s.seqlen * s.ngroups * s.dstate;
  const ref::SsdScanShape rs{s.batch, s.seqlen, s.nheads, s.headdim, s.ngroups, s.dstate};
  Outputs o{std::vector<float>(nx),
            std::vector<float>(nx),
            std::vector<float>(nbc),
            std::vector<float>(nbc),
            std::vector<float>(s.batch * s.seqlen * s.nheads),
            std::vector<float>(s.nheads),
            std::vector<float>(s.nheads)};
  ref::ssd_scan_forward(o.y.data(), in.x.data(), in.dt.data(), in.A.data(), in.Bm.data(), in.Cm.data(), in.D.data(),
                        rs);
  ref::ssd_scan_backward(o.dx.data(), o.ddt.data(), o.dA.data(), o.dB.data(), o.dC.data(), o.dD.data(), in.dy.data(),
                         in.x.data(), in.dt.data(), in.A.data(), in.Bm.data(), in.Cm.data(), in.D.data(), rs);
  return o;
}

// The kernels through the emulator over NaN-poisoned outputs and workspace; without D, dD is null too.
Outputs run_emulated(const SsdShape& s, const Inputs& in, bool with_d) {
  const int64_t nx = s.batch * s.seqlen * s.nheads * s.headdim, nbc = s.batch * s.seqlen * s.ngroups * s.dstate;
  const int64_t ndt = s.batch * s.seqlen * s.nheads;
  const auto x16 = to_bf16(in.x), B16 = to_bf16(in.Bm), C16 = to_bf16(in.Cm), dy16 = to_bf16(in.dy);
  const size_t ws_bytes = kernels::ssd::ssd_workspace_layout(s).total;
  std::vector<float4> workspace(ws_bytes / 16 + 1);
  std::memset(static_cast<void*>(workspace.data()), 0xFF, workspace.size() * 16);  // NaN: unwritten reads show
  const std::vector<float> nan_x(nx, NAN), nan_bc(nbc, NAN);
  std::vector<bf16> y = to_bf16(nan_x), dx = to_bf16(nan_x), dB = to_bf16(nan_bc), dC = to_bf16(nan_bc);
  std::vector<float> ddt(ndt, NAN), dA(s.nheads, NAN), dD(s.nheads, NAN);
  const float* D = with_d ? in.D.data() : nullptr;
  const kernels::SsdScanForwardParams fp{.y = y.data(),
                                         .x = x16.data(),
                                         .dt = in.dt.data(),
                                         .A = in.A.data(),
                                         .Bm = B16.data(),
                                         .Cm = C16.data(),
                                         .D = D,
                                         .workspace = workspace.data(),
                                         .workspace_bytes = ws_bytes,
                                         .shape = s};
  kernels::ssd::dispatch_dstate<kernels::ssd::ForwardRunner>(s.dstate, emu::Launch{}, kernels::ssd::forward_args(fp));
  const kernels::SsdScanBackwardParams bp{.dx = dx.data(),
                                          .ddt = ddt.data(),
                                          .dA = dA.data(),
                                          .dBm = dB.data(),
                                          .dCm = dC.data(),
                                          .dD = with_d ? dD.data() : nullptr,
                                          .dy = dy16.data(),
                                          .x = x16.data(),
                                          .dt = in.dt.data(),
                                          .A = in.A.data(),
                                          .Bm = B16.data(),
                                          .Cm = C16.data(),
                                          .D = D,
                                          .workspace = workspace.data(),
                                          .workspace_bytes = ws_bytes,
                                          .shape = s};
  kernels::ssd::dispatch_dstate<kernels::ssd::BackwardRunner>(s.dstate, emu::Launch{}, kernels::ssd::backward_args(bp));
  return {to_float(y), to_float(dx), to_float(dB), to_float(dC), ddt, dA, dD};
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

void PrintTo(const Case& c, std::ostream* os) {
  *os << "S" << c.shape.seqlen << " H" << c.shape.nheads << " N" << c.shape.dstate << " dt<" << c.dt_max << " A in -["
      << c.a_min << ", " << c.a_max << "]";
}

class SsdScanEmulated : public ::testing::TestWithParam<Case> {};

TEST_P(SsdScanEmulated, ForwardAndBackwardMatchReferenceWithAndWithoutSkip) {
  const Case cs = GetParam();
  const SsdShape s = cs.shape;
  const Inputs in = make_inputs(cs, 1000 + s.seqlen * 7 + s.nheads);
  const Outputs want = run_reference(s, in);
  const auto y_scan = minus_skip(want.y, in.x, in.D, s), dx_scan = minus_skip(want.dx, in.dy, in.D, s);
  const Outputs got = run_emulated(s, in, true);
  EXPECT_LT(test::relative_error(got.y, want.y), 1e-2) << "y";
  EXPECT_LT(test::relative_error(got.dx, want.dx), 1e-2) << "dx";
  EXPECT_LT(test::relative_error(got.ddt, want.ddt), 1e-2) << "ddt";
  EXPECT_LT(test::relative_error(got.dA, want.dA), 1e-2) << "dA";
  EXPECT_LT(test::relative_error(got.dB, want.dB), 1e-2) << "dB";
  EXPECT_LT(test::relative_error(got.dC, want.dC), 1e-2) << "dC";
  EXPECT_LT(test::relative_error(got.dD, want.dD), 1e-4) << "dD";
  EXPECT_LT(scan_part_error(got.y, in.x, in.D, s, y_scan), kScanTol) << "y - D x";
  EXPECT_LT(scan_part_error(got.dx, in.dy, in.D, s, dx_scan), kScanTol) << "dx - D dy";

  const Outputs no_d = run_emulated(s, in, false);
  EXPECT_LT(test::relative_error(no_d.y, y_scan), kScanTol) << "y, D = nullptr";
  EXPECT_LT(test::relative_error(no_d.dx, dx_scan), kScanTol) << "dx, D = nullptr";
  EXPECT_TRUE(same_bits(no_d.ddt, got.ddt)) << "ddt, D = nullptr";
  EXPECT_TRUE(same_bits(no_d.dA, got.dA)) << "dA, D = nullptr";
  EXPECT_TRUE(same_bits(no_d.dB, got.dB)) << "dB, D = nullptr";
  EXPECT_TRUE(same_bits(no_d.dC, got.dC)) << "dC, D = nullptr";
}

// Part of a chunk; one token; a short second chunk; 2 heads per group with their dB/dC split over blocks (hsplit > 1);
// one head per group (hsplit 1, direct bf16 stores); dstate 64 and strong decay; slow decay over three chunks.
const Case kCases[] = {
    {{1, 100, 2, 64, 2, 16}, 0.1f}, {{1, 1, 2, 64, 1, 16}, 0.1f},   {{1, 130, 2, 64, 2, 16}, 0.1f},
    {{2, 300, 4, 64, 2, 32}, 0.1f}, {{1, 200, 2, 64, 1, 64}, 1.0f}, {{1, 300, 2, 64, 1, 32}, 0.1f, 0.05f, 0.5f},
};

INSTANTIATE_TEST_SUITE_P(Shapes, SsdScanEmulated, ::testing::ValuesIn(kCases), [](const auto& info) {
  const SsdShape& s = info.param.shape;
  return strprintf("B%lld_S%lld_H%lld_G%lld_N%lld%s", static_cast<long long>(s.batch), static_cast<long long>(s.seqlen),
                   static_cast<long long>(s.nheads), static_cast<long long>(s.ngroups),
                   static_cast<long long>(s.dstate),
                   info.param.a_max < 1.0f ? "_slow_decay" : (info.param.dt_max > 0.5f ? "_strong_decay" : ""));
});

}  // namespace
}  // namespace sg
