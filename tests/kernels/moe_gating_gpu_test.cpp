// The MoE gating linear's gradients (kernels/moe_gating.h) against their CPU twins, from bf16 input and
// weight and fp32 dlogits:
//   backward_input: bf16(dx + dlogits Wg) bitwise equal to the twin's fp32 sum (same fmaf order) rounded
//                   once to bf16 (the host's round-to-nearest-even);
//   backward_weight: the dw increment within relative 1e-5 of reference/linear.h's double sums, and
//                   bitwise equal over two runs from the same start (fixed-order sums); into a bf16 dw, bit for
//                   bit the fp32 result on the rounded dw, rounded once.
// Shapes: T = 0, one token, odd T and H (scalar path when H % 8 != 0 or a row pointer is misaligned),
// one expert, many experts (1024), tokens split into several chunks with a partial last one, the small_moe
// shape (8192 x 8 x 768) and the a3b_proxy one (4096 x 128 x 2048). Tokens with all-zero dlogits (what an
// all-dropped token gets) are mixed in. dx starts from bf16 values and dw from non-zero values, so the
// accumulation is checked; the workspace is poisoned.
#include <gtest/gtest.h>

#include <cstring>
#include <sstream>
#include <vector>

#include "cuda/device.h"
#include "cuda/stream.h"
#include "gpu_test_util.h"
#include "kernels/moe_gating.h"
#include "reference/linear.h"
#include "reference/moe_gating.h"

namespace {

using namespace sg;
using namespace sg::test;

struct GatingShape {
  int64_t T, E, H;
  int64_t dx_offset = 0;  // elements: > 0 misaligns dx, forcing the scalar path of backward_input
};

std::ostream& operator<<(std::ostream& os, const GatingShape& s) {
  return os << "T" << s.T << "_E" << s.E << "_H" << s.H << "_off" << s.dx_offset;
}

class MoeGatingGpu : public ::testing::TestWithParam<GatingShape> {
 protected:
  void SetUp() override {
    if (cuda::device_count() == 0) GTEST_SKIP() << "no GPU";
  }
};

size_t sz(int64_t n) { return static_cast<size_t>(n); }

TEST_P(MoeGatingGpu, GradientsMatchTheTwins) {
  const auto [T, E, H, off] = GetParam();
  const uint64_t seed = static_cast<uint64_t>(T * 131 + E * 7 + H);
  const std::vector<float> x = round_bf16(random_normal(sz(T * H), seed + 1));
  const std::vector<float> w = round_bf16(random_normal(sz(E * H), seed + 2, 0.05f));
  std::vector<float> dlogits = random_normal(sz(T * E), seed + 3, 0.01f);
  for (int64_t t = 3; t < T; t += 5) std::fill_n(dlogits.begin() + t * E, E, 0.0f);
  const std::vector<float> dx0 = round_bf16(random_normal(sz(T * H), seed + 4, 0.01f));
  const std::vector<float> dw0 = random_normal(sz(E * H), seed + 5, 0.1f);

  std::vector<float> dx_ref = dx0, dw_ref = dw0;
  ref::moe_gating_backward_input(dx_ref.data(), dlogits.data(), w.data(), T, E, H);
  dx_ref = round_bf16(dx_ref);  // the GPU rounds the fp32 sum once
  ref::linear_backward_weight(dw_ref.data(), dlogits.data(), x.data(), T, H, E);

  DeviceBuffer<bf16> d_x(sz(T * H)), d_w(sz(E * H)), d_dx(sz(T * H + off));
  DeviceBuffer<float> d_dlogits(sz(T * E)), d_dw(sz(E * H));
  const size_t ws_bytes = kernels::moe_gating_backward_weight_workspace_bytes(T, E, H);
  DeviceBuffer<float> d_ws(ws_bytes / sizeof(float));
  d_x.upload(to_bf16(x));
  d_w.upload(to_bf16(w));
  d_dlogits.upload(dlogits);
  std::vector<float> dx0_padded(sz(off), 0.0f);
  dx0_padded.insert(dx0_padded.end(), dx0.begin(), dx0.end());
  cuda::Stream stream;
  const auto weight_gradient_into = [&](kernels::FloatBuffer dw) {
    d_ws.poison();
    kernels::moe_gating_backward_weight(stream, {.dw = dw,
                                                 .dlogits = d_dlogits.get(),
                                                 .x = d_x.get(),
                                                 .T = T,
                                                 .E = E,
                                                 .H = H,
                                                 .workspace = ws_bytes ? d_ws.get() : nullptr,
                                                 .workspace_bytes = ws_bytes});
  };
  const auto run = [&] {
    d_dx.upload(to_bf16(dx0_padded));
    d_dw.upload(dw0);
    kernels::moe_gating_backward_input(
        stream, {.dx = d_dx.get() + off, .dlogits = d_dlogits.get(), .w = d_w.get(), .T = T, .E = E, .H = H});
    weight_gradient_into(d_dw.get());
    SG_CUDA_CHECK(cudaStreamSynchronize(stream));
    std::vector<float> dx = to_float(d_dx.download());
    dx.erase(dx.begin(), dx.begin() + off);
    return std::make_pair(dx, d_dw.download());
  };
  const auto [dx, dw] = run();

  ASSERT_EQ(dx.size(), dx_ref.size());
  size_t differ = 0, first = dx.size();
  for (size_t i = 0; i < dx.size(); ++i) {
    if (std::memcmp(&dx[i], &dx_ref[i], sizeof(float)) != 0 && differ++ == 0) first = i;
  }
  EXPECT_EQ(differ, 0u) << "bf16(dx + dlogits Wg) differs at " << differ << " of " << dx.size() << " elements, first "
                        << first << ": " << (first < dx.size() ? dx[first] : 0.0f) << " vs "
                        << (first < dx.size() ? dx_ref[first] : 0.0f);
  // The increments (what the kernel added) against the twin's, so dw0 cannot hide an error.
  std::vector<float> added(dw.size()), added_ref(dw.size());
  for (size_t i = 0; i < dw.size(); ++i) added[i] = dw[i] - dw0[i], added_ref[i] = dw_ref[i] - dw0[i];
  EXPECT_LE(relative_error(added, added_ref), 1e-5) << "weight gradient";
  if (T > 0) {
    EXPECT_GT(relative_error(dw0, dw_ref), 1e-3) << "the weight check is not vacuous";
  }

  const auto [dx2, dw2] = run();
  EXPECT_EQ(std::memcmp(dw2.data(), dw.data(), dw.size() * sizeof(float)), 0) << "weight gradient not reproducible";
  EXPECT_EQ(std::memcmp(dx2.data(), dx.data(), dx.size() * sizeof(float)), 0) << "input gradient not reproducible";

  // Into a bf16 main gradient (ddp.grad_reduce_in_fp32=false): the same fp32 sum added to the widened value and
  // rounded once, so bit for bit the fp32 kernel's result on the rounded dw0, rounded.
  const std::vector<float> dw0_rounded = round_bf16(dw0);
  DeviceBuffer<bf16> d_dw16(sz(E * H));
  d_dw16.upload(to_bf16(dw0_rounded));
  d_dw.upload(dw0_rounded);
  weight_gradient_into(d_dw.get());
  weight_gradient_into(d_dw16.get());
  SG_CUDA_CHECK(cudaStreamSynchronize(stream));
  const std::vector<float> dw16 = to_float(d_dw16.download()), dw32 = round_bf16(d_dw.download());
  EXPECT_EQ(std::memcmp(dw16.data(), dw32.data(), dw16.size() * sizeof(float)), 0) << "bf16 weight gradient";
}

INSTANTIATE_TEST_SUITE_P(Shapes, MoeGatingGpu,
                         ::testing::Values(GatingShape{0, 8, 768}, GatingShape{1, 1, 8}, GatingShape{13, 5, 24},
                                           GatingShape{13, 5, 21}, GatingShape{37, 3, 770},
                                           GatingShape{29, 8, 64, 1}, GatingShape{2000, 8, 64},
                                           GatingShape{515, 1024, 16}, GatingShape{8192, 8, 768},
                                           GatingShape{4096, 128, 2048}),
                         [](const auto& info) {
                           std::ostringstream os;
                           os << info.param;
                           return os.str();
                         });

}  // namespace
