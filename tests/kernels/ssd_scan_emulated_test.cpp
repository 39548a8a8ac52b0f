// The SSD scan's GPU kernels (src/kernels/ssd_scan_*.cuh), run on the CPU by tests/simt_emulator.h with the
// same launch sequence as the CUDA launchers, against the fp32 sequential twin (reference/ssd_scan.h).
// Catches indexing, fragment-layout and chunking mistakes without a GPU; the numbers differ from the GPU's
// only in fp32 summation order (and std::exp for __expf). Small shapes: the emulator is slow.
// Tolerances as in tests/kernels/ssd_scan_gpu_test.cu: relative L2 error < 1e-2 for y, dx, dB, dC, ddt, dA
// (bf16 operands and outputs); < 1e-4 for dD (fp32 sums of the bf16 inputs).
#define SG_SIMT_EMULATION 1
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "core/strings.h"
#include "cuda/bf16.h"
#include "gpu_test_util.h"  // bf16 conversions only: nothing here touches a GPU
#include "kernels/ssd_scan_host.cuh"
#include "reference/ssd_scan.h"
#include "test_util.h"

namespace sg {
namespace {

using kernels::SsdShape;

using test::round_bf16;
using test::to_bf16;
using test::to_float;

struct Case {
  SsdShape shape;
  float dt_max;  // dt ~ U(0.001, dt_max); A ~ -U(1, 8)
};

class SsdScanEmulated : public ::testing::TestWithParam<Case> {};

TEST_P(SsdScanEmulated, ForwardAndBackwardMatchReference) {
  const Case cs = GetParam();
  const SsdShape s = cs.shape;
  const int64_t nx = s.batch * s.seqlen * s.nheads * s.headdim, nbc = s.batch * s.seqlen * s.ngroups * s.dstate;
  const int64_t ndt = s.batch * s.seqlen * s.nheads;
  const uint64_t seed = 1000 + s.seqlen * 7 + s.nheads;
  const auto x = round_bf16(test::random_normal(nx, seed));
  const auto Bm = round_bf16(test::random_normal(nbc, seed + 1, 0.5f));
  const auto Cm = round_bf16(test::random_normal(nbc, seed + 2, 0.5f));
  const auto dy = round_bf16(test::random_normal(nx, seed + 3));
  const auto D = test::random_normal(s.nheads, seed + 4);
  std::mt19937_64 gen(seed + 5);
  std::uniform_real_distribution<float> udt(0.001f, cs.dt_max), ua(1.0f, 8.0f);
  std::vector<float> dt(ndt), A(s.nheads);
  for (auto& v : dt) v = udt(gen);
  for (auto& v : A) v = -ua(gen);

  const ref::SsdScanShape rs{s.batch, s.seqlen, s.nheads, s.headdim, s.ngroups, s.dstate};
  std::vector<float> y_ref(nx), dx_ref(nx), ddt_ref(ndt), dA_ref(s.nheads), dB_ref(nbc), dC_ref(nbc), dD_ref(s.nheads);
  ref::ssd_scan_forward(y_ref.data(), x.data(), dt.data(), A.data(), Bm.data(), Cm.data(), D.data(), rs);
  ref::ssd_scan_backward(dx_ref.data(), ddt_ref.data(), dA_ref.data(), dB_ref.data(), dC_ref.data(), dD_ref.data(),
                         dy.data(), x.data(), dt.data(), A.data(), Bm.data(), Cm.data(), D.data(), rs);

  const auto x16 = to_bf16(x), B16 = to_bf16(Bm), C16 = to_bf16(Cm), dy16 = to_bf16(dy);
  const size_t ws_bytes = kernels::ssd::ssd_workspace_layout(s).total;
  std::vector<float4> workspace(ws_bytes / 16 + 1);
  std::memset(static_cast<void*>(workspace.data()), 0xFF, workspace.size() * 16);  // NaN: unwritten reads show
  std::vector<bf16> y(nx), dx(nx), dB(nbc), dC(nbc);
  std::vector<float> ddt(ndt, NAN), dA(s.nheads, NAN), dD(s.nheads, NAN);
  std::memset(static_cast<void*>(y.data()), 0xFF, y.size() * 2);
  std::memset(static_cast<void*>(dx.data()), 0xFF, dx.size() * 2);
  std::memset(static_cast<void*>(dB.data()), 0xFF, dB.size() * 2);
  std::memset(static_cast<void*>(dC.data()), 0xFF, dC.size() * 2);

  const kernels::SsdScanForwardParams fp{.y = y.data(), .x = x16.data(), .dt = dt.data(), .A = A.data(),
                                         .Bm = B16.data(), .Cm = C16.data(), .D = D.data(),
                                         .workspace = workspace.data(), .workspace_bytes = ws_bytes, .shape = s};
  const auto fa = kernels::ssd::forward_args(fp);
  kernels::ssd::dispatch_dstate<kernels::ssd::ForwardRunner>(s.dstate, emu::Launch{}, fa);
  EXPECT_LT(test::relative_error(to_float(y), y_ref), 1e-2) << "y";

  const kernels::SsdScanBackwardParams bp{.dx = dx.data(), .ddt = ddt.data(), .dA = dA.data(), .dBm = dB.data(),
                                          .dCm = dC.data(), .dD = dD.data(), .dy = dy16.data(), .x = x16.data(),
                                          .dt = dt.data(), .A = A.data(), .Bm = B16.data(), .Cm = C16.data(),
                                          .D = D.data(), .workspace = workspace.data(), .workspace_bytes = ws_bytes,
                                          .shape = s};
  const auto ba = kernels::ssd::backward_args(bp);
  kernels::ssd::dispatch_dstate<kernels::ssd::BackwardRunner>(s.dstate, emu::Launch{}, ba);
  EXPECT_LT(test::relative_error(to_float(dx), dx_ref), 1e-2) << "dx";
  EXPECT_LT(test::relative_error(ddt, ddt_ref), 1e-2) << "ddt";
  EXPECT_LT(test::relative_error(dA, dA_ref), 1e-2) << "dA";
  EXPECT_LT(test::relative_error(to_float(dB), dB_ref), 1e-2) << "dB";
  EXPECT_LT(test::relative_error(to_float(dC), dC_ref), 1e-2) << "dC";
  EXPECT_LT(test::relative_error(dD, dD_ref), 1e-4) << "dD";
}

// Part of a chunk; one token; a short second chunk; 2 heads per group with their dB/dC split over blocks (hsplit > 1);
// one head per group (hsplit 1, direct bf16 stores); dstate 64 and strong decay.
const Case kCases[] = {
    {{1, 100, 2, 64, 2, 16}, 0.1f},
    {{1, 1, 2, 64, 1, 16}, 0.1f},
    {{1, 130, 2, 64, 2, 16}, 0.1f},
    {{2, 300, 4, 64, 2, 32}, 0.1f},
    {{1, 200, 2, 64, 1, 64}, 1.0f},
};

INSTANTIATE_TEST_SUITE_P(Shapes, SsdScanEmulated, ::testing::ValuesIn(kCases), [](const auto& info) {
  const SsdShape& s = info.param.shape;
  return strprintf("B%lld_S%lld_H%lld_G%lld_N%lld", static_cast<long long>(s.batch), static_cast<long long>(s.seqlen),
                   static_cast<long long>(s.nheads), static_cast<long long>(s.ngroups),
                   static_cast<long long>(s.dstate));
});

}  // namespace
}  // namespace sg
