// GroupedLinearBackwardWeight in overwrite mode (accumulate = false, kernels/grouped_gemm.h) against
// reference/grouped_gemm's overwrite twin, on fresh random bf16-rounded inputs, at standard_routings()
// (grouped_gemm_routing.h: zero-row experts first/middle/last, all rows on one expert, skewed odd counts,
// 128 experts, capacity segments with padding rows, every expert empty; N/K multiples of 8 that are not
// tile multiples (72, 136, 200) and 256/768), with each of backward_weight's two tiles forced
// (WeightGradTile::kWide 128x192 and kNarrow 128x96, kernels/grouped_gemm_tiles.h; the plan picks one per
// shape).
// dW is poisoned (NaN) before every overwrite: beta 0 must never read it (a read would give 0 * NaN =
// NaN), every expert's dW must be written, and the dW of a zero-row expert must be exactly 0 (the
// zero-fill blocks of the setup launch). Tolerance: relative error < 1e-4 over all of dW (fp32 sums of
// exact bf16 products; only the summation order differs). Also: a second overwrite on a fresh poison is
// bitwise equal to the first; overwrite then accumulate (first and second microbatch) matches the twin
// doing the same; a CUDA graph of the overwrite (setup with zero-fill + GEMM) replayed with new device
// counts (experts becoming empty and non-empty) matches the twin and equals eager bit for bit.
// Into a bf16 dW (GroupedGemmDims::weight_grad_dtype, ddp.grad_reduce_in_fp32=false), at every routing and tile:
// the overwrite writes every element of a poisoned dW, zero-row experts exactly 0, each element the bf16 value
// nearest to the exact sum (count_not_nearest_bf16: but for 1%, where the GPU's fp32 order moved a sum across a
// rounding boundary); then an accumulate adds to the widened values, rounds once again, and leaves the zero-row
// experts at 0.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "cuda/stream.h"
#include "gpu_test_util.h"
#include "grouped_gemm_routing.h"
#include "kernels/grouped_gemm.h"
#include "reference/grouped_gemm.h"

namespace {

using namespace sg;
using namespace sg::test;
using kernels::WeightGradTile;

constexpr double kWgradRelTol = 1e-4;

kernels::GroupedGemmDims with_tile(kernels::GroupedGemmDims dims, WeightGradTile tile, kernels::FloatDtype dw_dtype) {
  dims.weight_grad_tile = tile;
  dims.weight_grad_dtype = dw_dtype;
  return dims;
}

// A backward_weight plan on its own workspace, with the device inputs of one routing; dW of DW (float or bf16).
template <class DW>
struct WgradCaseOf {
  static constexpr kernels::FloatDtype kDwDtype =
      std::is_same_v<DW, bf16> ? kernels::FloatDtype::bf16 : kernels::FloatDtype::fp32;
  WgradCaseOf(const Routing& r, const std::vector<float>& x_host, const std::vector<float>& dy_host,
              WeightGradTile tile = WeightGradTile::kAuto)
      : plan(with_tile(dims_of(r), tile, kDwDtype)), ws(plan.workspace_bytes()), x(r.total_rows * r.K),
        dy(r.total_rows * r.N), dw(static_cast<int64_t>(r.counts.size()) * r.N * r.K), counts(r.counts.size()),
        offsets(r.counts.size()) {
    plan.bind(ws.get(), ws.size());
    plan.initialize();
    x.upload(to_bf16(x_host));
    dy.upload(to_bf16(dy_host));
    counts.upload(r.counts);
    offsets.upload(r.offsets);
    sync_device();
  }
  kernels::GroupedLinearBackwardWeightParams params(bool accumulate) {
    return {.dw = dw.get(),
            .dy = dy.get(),
            .x = x.get(),
            .counts = counts.get(),
            .offsets = offsets.get(),
            .accumulate = accumulate};
  }
  kernels::GroupedLinearBackwardWeight plan;
  DeviceBuffer<unsigned char> ws;
  DeviceBuffer<bf16> x, dy;
  DeviceBuffer<DW> dw;
  DeviceBuffer<int32_t> counts, offsets;
};
using WgradCase = WgradCaseOf<float>;

// The twin's overwrite result, starting from NaN so that anything it failed to write shows.
std::vector<float> reference_overwrite(const Routing& r, const std::vector<float>& dy, const std::vector<float>& x) {
  std::vector<float> dw(r.counts.size() * r.N * r.K, std::numeric_limits<float>::quiet_NaN());
  ref::grouped_linear_backward_weight(dw.data(), dy.data(), x.data(), rows_of(r), r.N, r.K, /*accumulate=*/false);
  return dw;
}

int64_t non_finite(const std::vector<float>& v) {
  int64_t n = 0;
  for (float f : v) n += !std::isfinite(f);
  return n;
}

// The whole overwrite result: finite everywhere, zero-row experts exactly +0.0f, close to the twin.
void expect_overwrite(const Routing& r, const std::vector<float>& got, const std::vector<float>& want,
                      const std::string& when) {
  EXPECT_EQ(non_finite(got), 0) << when << ": poison left in dW, or read by beta 0";
  EXPECT_LT(relative_error(got, want), kWgradRelTol) << when;
  const int64_t NK = r.N * r.K;
  for (size_t g = 0; g < r.counts.size(); ++g) {
    if (r.counts[g] != 0) continue;
    const std::vector<float> expert(got.begin() + g * NK, got.begin() + (g + 1) * NK);
    EXPECT_TRUE(bitwise_equal(expert, std::vector<float>(NK, 0.0f))) << when << ": zero-row expert " << g;
  }
}

class GroupedGemmOverwriteGpu : public ::testing::TestWithParam<std::tuple<Routing, WeightGradTile>> {
 protected:
  cuda::Stream stream;
};

TEST_P(GroupedGemmOverwriteGpu, OverwriteMatchesReferenceOnPoisonedDw) {
  const auto& [r, tile] = GetParam();
  const uint64_t seed = 2000 * r.counts.size() + r.N + r.K;
  const auto x = round_bf16(random_normal(r.total_rows * r.K, seed + 1));
  const auto dy = round_bf16(random_normal(r.total_rows * r.N, seed + 2));
  const auto dw_over = reference_overwrite(r, dy, x);
  ASSERT_EQ(non_finite(dw_over), 0) << "the twin's overwrite left values unwritten";
  auto dw_over_acc = dw_over;  // the first microbatch overwrites, the second accumulates
  ref::grouped_linear_backward_weight(dw_over_acc.data(), dy.data(), x.data(), rows_of(r), r.N, r.K);

  WgradCase c(r, x, dy, tile);
  ASSERT_NE(c.plan.kernel_name().find(tile == WeightGradTile::kWide ? "tile 128x192" : "tile 128x96"),
            std::string::npos)
      << c.plan.kernel_name();
  std::vector<float> first;
  for (int run = 0; run < 2; ++run) {
    c.dw.poison();
    c.plan.run(stream, c.params(/*accumulate=*/false));
    stream.synchronize();
    const auto got = c.dw.download();
    if (run == 0) {
      expect_overwrite(r, got, dw_over, "overwrite");
      first = got;
    } else {
      EXPECT_TRUE(bitwise_equal(first, got)) << "second overwrite differs";
    }
  }
  c.plan.run(stream, c.params(/*accumulate=*/true));
  stream.synchronize();
  const auto accumulated = c.dw.download();
  EXPECT_LT(relative_error(accumulated, dw_over_acc), kWgradRelTol) << "overwrite then accumulate";
}

// Every standard routing with each weight-gradient tile; the test's name says both.
auto routings_and_tiles() {
  return ::testing::Combine(::testing::ValuesIn(standard_routings()),
                            ::testing::Values(WeightGradTile::kWide, WeightGradTile::kNarrow));
}
std::string routing_and_tile_name(const ::testing::TestParamInfo<GroupedGemmOverwriteGpu::ParamType>& info) {
  return std::get<0>(info.param).name + "_" + kernels::weight_grad_tile_name(std::get<1>(info.param));
}

INSTANTIATE_TEST_SUITE_P(Routings, GroupedGemmOverwriteGpu, routings_and_tiles(), routing_and_tile_name);

class GroupedGemmOverwriteBf16Gpu : public GroupedGemmOverwriteGpu {};

TEST_P(GroupedGemmOverwriteBf16Gpu, OverwriteAndAccumulateRoundEachSumOnce) {
  const auto& [r, tile] = GetParam();
  const uint64_t seed = 3000 * r.counts.size() + r.N + r.K;
  const auto x = round_bf16(random_normal(r.total_rows * r.K, seed + 1));
  const auto dy = round_bf16(random_normal(r.total_rows * r.N, seed + 2));
  const int64_t NK = r.N * r.K;
  // Each expert's exact sum over its own rows, onto `base` (the stored values the run adds to).
  const auto exact_sum_onto = [&](const std::vector<float>& base) {
    std::vector<double> sum(base.begin(), base.end());
    for (size_t g = 0; g < r.counts.size(); ++g) {
      const int64_t first = r.offsets[g];
      add_exact_weight_gradient(sum.data() + g * NK, dy.data() + first * r.N, x.data() + first * r.K, r.counts[g], r.K,
                                r.N);
    }
    return sum;
  };
  const int64_t allowed = allowed_bf16_order_misses(r.counts.size() * NK);

  WgradCaseOf<bf16> c(r, x, dy, tile);
  ASSERT_NE(c.plan.kernel_name().find("bf16 dW"), std::string::npos) << c.plan.kernel_name();
  c.dw.poison();
  c.plan.run(stream, c.params(/*accumulate=*/false));
  stream.synchronize();
  const auto overwritten = to_float(c.dw.download());
  EXPECT_EQ(non_finite(overwritten), 0) << "poison left in dW, or read by beta 0";
  EXPECT_LE(count_not_nearest_bf16(overwritten, exact_sum_onto(std::vector<float>(overwritten.size(), 0.0f))), allowed)
      << "overwrite";
  c.plan.run(stream, c.params(/*accumulate=*/true));
  stream.synchronize();
  const auto accumulated = to_float(c.dw.download());
  EXPECT_LE(count_not_nearest_bf16(accumulated, exact_sum_onto(overwritten)), allowed) << "overwrite then accumulate";
  for (size_t g = 0; g < r.counts.size(); ++g) {
    if (r.counts[g] != 0) continue;
    for (const auto* v : {&overwritten, &accumulated}) {
      EXPECT_TRUE(bitwise_equal(std::vector<float>(v->begin() + g * NK, v->begin() + (g + 1) * NK),
                                std::vector<float>(NK, 0.0f)))
          << "zero-row expert " << g;
    }
  }
  WgradCase fp32_plan(r, x, dy, tile);
  const std::string error = thrown_message([&] {
    kernels::GroupedLinearBackwardWeightParams wrong = c.params(false);
    wrong.dw = fp32_plan.dw.get();
    c.plan.run(stream, wrong);
  });
  EXPECT_NE(error.find("planned for a bf16 dW, given a fp32 one"), std::string::npos) << error;
}

INSTANTIATE_TEST_SUITE_P(Routings, GroupedGemmOverwriteBf16Gpu, routings_and_tiles(), routing_and_tile_name);

// One capture of the overwrite replayed with new counts in the same device buffers: experts that
// become empty are zeroed, experts that become non-empty are computed, and every replay equals eager.
TEST(GroupedGemmOverwriteGpuGraph, ReplayFollowsDeviceCounts) {
  const Routing a = packed("a", 136, 200, {10, 0, 50, 4});  // 64 rows
  const Routing b = packed("b", 136, 200, {0, 64, 0, 0});   // all on expert 1
  const Routing c = packed("c", 136, 200, {16, 16, 16, 16});
  const auto x = round_bf16(random_normal(a.total_rows * a.K, 21));
  const auto dy = round_bf16(random_normal(a.total_rows * a.N, 22));
  WgradCase wgrad(a, x, dy);
  cuda::Stream stream;
  const auto p = wgrad.params(/*accumulate=*/false);
  expect_replays_follow_routings<float>(
      stream, [&](cudaStream_t st) { wgrad.plan.run(st, p); }, {&a, &b, &c, &a}, wgrad.counts, wgrad.offsets,
      wgrad.dw, [&](const Routing& routing, const std::vector<float>& replayed) {
        expect_overwrite(routing, replayed, reference_overwrite(routing, dy, x),
                         "graph replay, routing " + routing.name);
      });
}

}  // namespace
