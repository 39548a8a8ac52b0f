// GPU SSD scan (forward, backward) against reference/ssd_scan (the sequential recurrence) on the same
// bf16-rounded inputs, fresh random per shape: sequence lengths that are not multiples of the chunk (1, 127,
// 129, 300), 2048; ngroups 1 and 8; nheads 2..32; dstate 16/32/64/128; one shape with strong decay and one
// with slow decay (state carried across chunks). Every shape runs with D ~ N(0, 1) and with D = nullptr.
// Tolerances (relative L2 error vs the fp32 twin): y, dx, dB, dC, ddt, dA < 1e-2 (bf16 operands and
// outputs, bf16 copies of the passed states as matmul operands); dD < 1e-4 (fp32 sums of the inputs).
// The skip term D x is most of y (D dy of dx), so 1e-2 barely sees the scan: its part alone, y - D x and
// dx - D dy, must be within kScanTol of the twin's, after forgiving each element half a bf16 step of its
// stored value (its own rounding); without D, y and dx < kScanTol and ddt, dA, dB, dC the bits of the D run.
// Outputs and the workspace are poisoned (NaN) before every run; a second run, and one forward+backward
// captured in a CUDA graph and replayed (twice), must equal the eager results bit for bit. Strided x/B/C
// (column slices of one conv-output row) and strided dx/dB/dC give the packed results bit for bit.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <ostream>
#include <random>
#include <vector>

#include "core/strings.h"
#include "cuda/stream.h"
#include "gpu_test_util.h"
#include "kernels/ssd_scan.h"
#include "reference/ssd_scan.h"
#include "ssd_scan_checks.h"

namespace {

using namespace sg;
using namespace sg::test;
using kernels::SsdShape;

struct Case {
  SsdShape shape;
  float dt_max;                       // dt ~ U(0.001, dt_max)
  float a_min = 1.0f, a_max = 16.0f;  // A ~ -U(a_min, a_max); slow decay (a_max 0.5) carries state across chunks
};
void PrintTo(const Case& c, std::ostream* os) {
  *os << "S" << c.shape.seqlen << " H" << c.shape.nheads << " N" << c.shape.dstate << " dt<" << c.dt_max << " A in -["
      << c.a_min << ", " << c.a_max << "]";
}

void sync() {
  SG_CUDA_CHECK(cudaDeviceSynchronize());
}

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

int64_t nx(const SsdShape& s) {
  return s.batch * s.seqlen * s.nheads * s.headdim;
}
int64_t nbc(const SsdShape& s) {
  return s.batch * s.seqlen * s.ngroups * s.dstate;
}
int64_t ndt(const SsdShape& s) {
  return s.batch * s.seqlen * s.nheads;
}

// Device copies of the inputs and outputs of one shape.
struct Problem {
  SsdShape s;
  std::vector<float> x, Bm, Cm, dy, dt, A, D;
  DeviceBuffer<bf16> d_x, d_B, d_C, d_dy, d_y, d_dx, d_dB, d_dC;
  DeviceBuffer<float> d_dt, d_A, d_D, d_ddt, d_dA, d_dD;
  DeviceBuffer<unsigned char> d_ws;

  Problem(const Case& cs, uint64_t seed)
      : s(cs.shape),
        d_x(nx(s)),
        d_B(nbc(s)),
        d_C(nbc(s)),
        d_dy(nx(s)),
        d_y(nx(s)),
        d_dx(nx(s)),
        d_dB(nbc(s)),
        d_dC(nbc(s)),
        d_dt(ndt(s)),
        d_A(s.nheads),
        d_D(s.nheads),
        d_ddt(ndt(s)),
        d_dA(s.nheads),
        d_dD(s.nheads),
        d_ws(kernels::ssd_workspace_bytes(s)) {
    x = round_bf16(random_normal(nx(s), seed));
    Bm = round_bf16(random_normal(nbc(s), seed + 1, 0.5f));
    Cm = round_bf16(random_normal(nbc(s), seed + 2, 0.5f));
    dy = round_bf16(random_normal(nx(s), seed + 3));
    D = random_normal(s.nheads, seed + 4);
    std::mt19937_64 gen(seed + 5);
    std::uniform_real_distribution<float> udt(0.001f, cs.dt_max), ua(cs.a_min, cs.a_max);
    dt.resize(ndt(s));
    for (auto& v : dt) v = udt(gen);
    A.resize(s.nheads);
    for (auto& v : A) v = -ua(gen);
    d_x.upload(to_bf16(x));
    d_B.upload(to_bf16(Bm));
    d_C.upload(to_bf16(Cm));
    d_dy.upload(to_bf16(dy));
    d_dt.upload(dt);
    d_A.upload(A);
    d_D.upload(D);
  }

  // with_d false: no skip term (D and dD null).
  kernels::SsdScanForwardParams forward_params(bool with_d = true) {
    return {.y = d_y.get(),
            .x = d_x.get(),
            .dt = d_dt.get(),
            .A = d_A.get(),
            .Bm = d_B.get(),
            .Cm = d_C.get(),
            .D = with_d ? d_D.get() : nullptr,
            .workspace = d_ws.get(),
            .workspace_bytes = d_ws.size(),
            .shape = s};
  }
  kernels::SsdScanBackwardParams backward_params(bool with_d = true) {
    return {.dx = d_dx.get(),
            .ddt = d_ddt.get(),
            .dA = d_dA.get(),
            .dBm = d_dB.get(),
            .dCm = d_dC.get(),
            .dD = with_d ? d_dD.get() : nullptr,
            .dy = d_dy.get(),
            .x = d_x.get(),
            .dt = d_dt.get(),
            .A = d_A.get(),
            .Bm = d_B.get(),
            .Cm = d_C.get(),
            .D = with_d ? d_D.get() : nullptr,
            .workspace = d_ws.get(),
            .workspace_bytes = d_ws.size(),
            .shape = s};
  }
  void poison_outputs() {
    d_y.poison(), d_dx.poison(), d_dB.poison(), d_dC.poison(), d_ddt.poison(), d_dA.poison(), d_dD.poison();
    d_ws.poison();
  }
};

struct Results {
  std::vector<bf16> y, dx, dB, dC;
  std::vector<float> ddt, dA, dD;
};
Results download(const Problem& pr) {
  return {pr.d_y.download(),   pr.d_dx.download(), pr.d_dB.download(), pr.d_dC.download(),
          pr.d_ddt.download(), pr.d_dA.download(), pr.d_dD.download()};
}
void expect_same_bits(const Results& a, const Results& b, const char* what) {
  EXPECT_TRUE(same_bits(a.y, b.y)) << what << ": y";
  EXPECT_TRUE(same_bits(a.dx, b.dx)) << what << ": dx";
  EXPECT_TRUE(same_bits(a.dB, b.dB)) << what << ": dB";
  EXPECT_TRUE(same_bits(a.dC, b.dC)) << what << ": dC";
  EXPECT_TRUE(same_bits(a.ddt, b.ddt)) << what << ": ddt";
  EXPECT_TRUE(same_bits(a.dA, b.dA)) << what << ": dA";
  EXPECT_TRUE(same_bits(a.dD, b.dD)) << what << ": dD";
}

class SsdScanGpu : public ::testing::TestWithParam<Case> {};

TEST_P(SsdScanGpu, MatchesReferenceDeterministicAndGraphSafe) {
  const Case cs = GetParam();
  const SsdShape& s = cs.shape;
  Problem pr(cs, 100 + s.seqlen * 31 + s.nheads * 7 + s.dstate);
  const ref::SsdScanShape rs{s.batch, s.seqlen, s.nheads, s.headdim, s.ngroups, s.dstate};
  std::vector<float> y_ref(nx(s)), dx_ref(nx(s)), ddt_ref(ndt(s)), dA_ref(s.nheads), dB_ref(nbc(s)), dC_ref(nbc(s)),
      dD_ref(s.nheads);
  ref::ssd_scan_forward(y_ref.data(), pr.x.data(), pr.dt.data(), pr.A.data(), pr.Bm.data(), pr.Cm.data(), pr.D.data(),
                        rs);
  ref::ssd_scan_backward(dx_ref.data(), ddt_ref.data(), dA_ref.data(), dB_ref.data(), dC_ref.data(), dD_ref.data(),
                         pr.dy.data(), pr.x.data(), pr.dt.data(), pr.A.data(), pr.Bm.data(), pr.Cm.data(), pr.D.data(),
                         rs);
  const auto y_scan_ref = minus_skip(y_ref, pr.x, pr.D, s), dx_scan_ref = minus_skip(dx_ref, pr.dy, pr.D, s);
  cuda::Stream stream;
  auto eager = [&](bool with_d = true) {
    pr.poison_outputs();
    sync();
    kernels::ssd_scan_forward(stream, pr.forward_params(with_d));
    kernels::ssd_scan_backward(stream, pr.backward_params(with_d));
    sync();
    return download(pr);
  };
  const Results first = eager();
  EXPECT_LT(relative_error(to_float(first.y), y_ref), 1e-2) << "y";
  EXPECT_LT(relative_error(to_float(first.dx), dx_ref), 1e-2) << "dx";
  EXPECT_LT(relative_error(to_float(first.dB), dB_ref), 1e-2) << "dB";
  EXPECT_LT(relative_error(to_float(first.dC), dC_ref), 1e-2) << "dC";
  EXPECT_LT(relative_error(first.ddt, ddt_ref), 1e-2) << "ddt";
  EXPECT_LT(relative_error(first.dA, dA_ref), 1e-2) << "dA";
  EXPECT_LT(relative_error(first.dD, dD_ref), 1e-4) << "dD";
  EXPECT_LT(scan_part_error(to_float(first.y), pr.x, pr.D, s, y_scan_ref), kScanTol) << "y - D x";
  EXPECT_LT(scan_part_error(to_float(first.dx), pr.dy, pr.D, s, dx_scan_ref), kScanTol) << "dx - D dy";

  // No skip term: the scan part alone; the other gradients do not depend on D.
  const Results no_d = eager(false);
  EXPECT_LT(relative_error(to_float(no_d.y), y_scan_ref), kScanTol) << "y, D = nullptr";
  EXPECT_LT(relative_error(to_float(no_d.dx), dx_scan_ref), kScanTol) << "dx, D = nullptr";
  EXPECT_TRUE(same_bits(no_d.ddt, first.ddt)) << "ddt, D = nullptr";
  EXPECT_TRUE(same_bits(no_d.dA, first.dA)) << "dA, D = nullptr";
  EXPECT_TRUE(same_bits(no_d.dB, first.dB)) << "dB, D = nullptr";
  EXPECT_TRUE(same_bits(no_d.dC, first.dC)) << "dC, D = nullptr";

  expect_same_bits(eager(), first, "second eager run");

  // One forward + backward captured as a graph, replayed twice over poisoned outputs.
  pr.poison_outputs();
  sync();
  cudaGraph_t graph = nullptr;
  SG_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  kernels::ssd_scan_forward(stream, pr.forward_params());
  kernels::ssd_scan_backward(stream, pr.backward_params());
  SG_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec = nullptr;
  SG_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  for (int replay = 0; replay < 2; ++replay) {
    pr.poison_outputs();
    sync();
    SG_CUDA_CHECK(cudaGraphLaunch(exec, stream));
    sync();
    expect_same_bits(download(pr), first, replay == 0 ? "graph replay 1" : "graph replay 2");
  }
  SG_CUDA_CHECK(cudaGraphExecDestroy(exec));
  SG_CUDA_CHECK(cudaGraphDestroy(graph));
}

const Case kCases[] = {
    {{1, 1, 2, 64, 1, 16}, 0.1f},      {{2, 127, 4, 64, 1, 64}, 0.1f},
    {{2, 129, 2, 64, 2, 32}, 0.1f},    {{1, 300, 8, 64, 8, 128}, 0.1f},
    {{2, 300, 16, 64, 8, 128}, 0.1f},  {{1, 500, 4, 64, 2, 128}, 1.0f},
    {{1, 2048, 32, 64, 8, 128}, 0.1f}, {{1, 2048, 32, 64, 1, 64}, 0.1f},
    {{2, 640, 24, 64, 1, 16}, 0.1f},   {{2, 1000, 8, 64, 2, 128}, 0.1f, 0.05f, 0.5f},
};

INSTANTIATE_TEST_SUITE_P(Shapes, SsdScanGpu, ::testing::ValuesIn(kCases), [](const auto& info) {
  const SsdShape& s = info.param.shape;
  return strprintf("B%lld_S%lld_H%lld_G%lld_N%lld%s", static_cast<long long>(s.batch), static_cast<long long>(s.seqlen),
                   static_cast<long long>(s.nheads), static_cast<long long>(s.ngroups),
                   static_cast<long long>(s.dstate),
                   info.param.a_max < 1.0f ? "_slow_decay" : (info.param.dt_max > 0.5f ? "_strong_decay" : ""));
});

// x, B, C as column slices of one row [x | B | C] (as the conv output holds them), dy in a wider row, and
// dx, dB, dC written into one gradient row: the same bits as the packed layout.
TEST(SsdScanGpuMisc, RowStridesGiveThePackedResults) {
  const Case cs{{2, 200, 8, 64, 2, 64}, 0.1f};
  const SsdShape& s = cs.shape;
  Problem pr(cs, 77);
  cuda::Stream stream;
  pr.poison_outputs();
  sync();
  kernels::ssd_scan_forward(stream, pr.forward_params());
  kernels::ssd_scan_backward(stream, pr.backward_params());
  sync();
  const Results packed = download(pr);

  const int64_t xw = s.nheads * s.headdim, bw = s.ngroups * s.dstate, row = xw + 2 * bw, rows = s.batch * s.seqlen;
  std::vector<float> xbc(rows * row), dy_wide(rows * (xw + 8), 0.0f);
  for (int64_t r = 0; r < rows; ++r) {
    std::copy(pr.x.begin() + r * xw, pr.x.begin() + (r + 1) * xw, xbc.begin() + r * row);
    std::copy(pr.Bm.begin() + r * bw, pr.Bm.begin() + (r + 1) * bw, xbc.begin() + r * row + xw);
    std::copy(pr.Cm.begin() + r * bw, pr.Cm.begin() + (r + 1) * bw, xbc.begin() + r * row + xw + bw);
    std::copy(pr.dy.begin() + r * xw, pr.dy.begin() + (r + 1) * xw, dy_wide.begin() + r * (xw + 8));
  }
  DeviceBuffer<bf16> d_xbc(rows * row), d_dxbc(rows * row), d_dy(rows * (xw + 8)), d_y(rows * (xw + 8));
  d_xbc.upload(to_bf16(xbc));
  d_dy.upload(to_bf16(dy_wide));
  d_dxbc.poison();
  d_y.poison();
  pr.d_ddt.poison(), pr.d_dA.poison(), pr.d_dD.poison(), pr.d_ws.poison();
  auto fp = pr.forward_params();
  fp.y = d_y.get(), fp.y_row_stride = xw + 8;
  fp.x = d_xbc.get(), fp.Bm = d_xbc.get() + xw, fp.Cm = d_xbc.get() + xw + bw;
  fp.x_row_stride = fp.bm_row_stride = fp.cm_row_stride = row;
  auto bp = pr.backward_params();
  bp.x = fp.x, bp.Bm = fp.Bm, bp.Cm = fp.Cm, bp.x_row_stride = bp.bm_row_stride = bp.cm_row_stride = row;
  bp.dy = d_dy.get(), bp.dy_row_stride = xw + 8;
  bp.dx = d_dxbc.get(), bp.dBm = d_dxbc.get() + xw, bp.dCm = d_dxbc.get() + xw + bw;
  bp.dx_row_stride = bp.dbm_row_stride = bp.dcm_row_stride = row;
  sync();
  kernels::ssd_scan_forward(stream, fp);
  kernels::ssd_scan_backward(stream, bp);
  sync();
  const auto y_wide = d_y.download(), dxbc = d_dxbc.download();
  std::vector<bf16> y(nx(s)), dx(nx(s)), dB(nbc(s)), dC(nbc(s));
  for (int64_t r = 0; r < rows; ++r) {
    std::copy(y_wide.begin() + r * (xw + 8), y_wide.begin() + r * (xw + 8) + xw, y.begin() + r * xw);
    std::copy(dxbc.begin() + r * row, dxbc.begin() + r * row + xw, dx.begin() + r * xw);
    std::copy(dxbc.begin() + r * row + xw, dxbc.begin() + r * row + xw + bw, dB.begin() + r * bw);
    std::copy(dxbc.begin() + r * row + xw + bw, dxbc.begin() + (r + 1) * row, dC.begin() + r * bw);
  }
  EXPECT_TRUE(same_bits(y, packed.y));
  EXPECT_TRUE(same_bits(dx, packed.dx));
  EXPECT_TRUE(same_bits(dB, packed.dB));
  EXPECT_TRUE(same_bits(dC, packed.dC));
  EXPECT_TRUE(same_bits(pr.d_ddt.download(), packed.ddt));
  EXPECT_TRUE(same_bits(pr.d_dA.download(), packed.dA));
}

TEST(SsdScanGpuMisc, RejectsBadWorkspaceAndShapes) {
  const Case cs{{1, 64, 2, 64, 1, 16}, 0.1f};
  Problem pr(cs, 5);
  cuda::Stream stream;
  auto fp = pr.forward_params();
  fp.workspace_bytes = 16;
  EXPECT_NE(thrown_message([&] { kernels::ssd_scan_forward(stream, fp); }).find("ssd_workspace_bytes"),
            std::string::npos);
  EXPECT_NE(thrown_message([&] {
              (void)kernels::ssd_workspace_bytes({1, 64, 2, 32, 1, 16});
            }).find("headdim 32"),
            std::string::npos);
  EXPECT_NE(thrown_message([&] {
              (void)kernels::ssd_workspace_bytes({1, 64, 3, 64, 2, 16});
            }).find("multiple"),
            std::string::npos);
  auto bp = pr.backward_params();
  bp.dx_row_stride = 65;
  EXPECT_NE(thrown_message([&] { kernels::ssd_scan_backward(stream, bp); }).find("dx_row_stride"), std::string::npos);
}

}  // namespace
