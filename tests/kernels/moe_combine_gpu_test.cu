// GPU MoE combine (unpermute) forward and backward against reference/moe_combine, with maps from
// ref::moe_preprocess (reference/moe_permute.h): dropless, dropped slots and padding rows. Padding / unused
// rows of the expert output hold NaN, so a kernel that reads them fails.
// Tolerances: bf16 outputs (out, dexpert_out) computed in fp32 from the same bf16-rounded inputs,
// relative error < kBf16RelTol (1e-2); dprobs (fp32 dot products of bf16 rows) relative error < 1e-5;
// padding rows of dexpert_out and dprobs of dropped slots exactly 0. Outputs poisoned before each run;
// a second run is bitwise identical.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "core/strings.h"
#include "cuda/stream.h"
#include "kernels/moe_combine.h"
#include "moe_test_inputs.h"
#include "reference/moe_combine.h"
#include "reference/moe_permute.h"
#include "reference/moe_router.h"

namespace {

using namespace sg;
using namespace sg::test;
using ref::MoeDispatch;
using ref::MoeDropPolicy;

constexpr double kDotRelTol = 1e-5;

class MoeCombineGpu : public ::testing::TestWithParam<MoeDispatchCase> {};

TEST_P(MoeCombineGpu, ForwardAndBackwardMatchReference) {
  const MoeDispatchCase& c = GetParam();
  const uint64_t seed = c.seed(9000);
  const auto routed = c.route(seed);
  const MoeDispatch& d = routed.dispatch;
  const int64_t slots = routed.slots, rows = routed.rows;
  const std::vector<int32_t>& map = routed.map;
  const std::vector<float>& probs = routed.probs;
  const int64_t H = c.H;
  const auto perm = ref::moe_preprocess(map.data(), probs.data(), d);

  auto expert_out = round_bf16(random_normal(rows * H, seed + 1));
  for (int64_t r = 0; r < rows; ++r) {
    if (perm.row_to_slot[r] < 0) std::fill(expert_out.begin() + r * H, expert_out.begin() + (r + 1) * H, NAN);
  }
  const auto dout = round_bf16(random_normal(c.T * H, seed + 2));
  std::vector<float> out_ref(c.T * H), dexpert_ref(rows * H), dprobs_ref(slots);
  ref::moe_combine_forward<float>(out_ref.data(), expert_out.data(), probs.data(), perm.slot_to_row.data(), c.T, c.k,
                                  H);
  ref::moe_combine_backward<float>(dexpert_ref.data(), dprobs_ref.data(), dout.data(), expert_out.data(), probs.data(),
                                   perm.slot_to_row.data(), perm.row_to_slot.data(), c.T, c.k, H, rows);

  DeviceBuffer<bf16> d_expert_out(rows * H), d_out(c.T * H), d_dout(c.T * H), d_dexpert(rows * H);
  DeviceBuffer<float> d_probs(slots), d_dprobs(slots);
  DeviceBuffer<int32_t> d_slot_to_row(slots), d_row_to_slot(rows);
  d_expert_out.upload(to_bf16(expert_out));
  d_dout.upload(to_bf16(dout));
  d_probs.upload(probs);
  d_slot_to_row.upload(perm.slot_to_row);
  d_row_to_slot.upload(perm.row_to_slot);
  cuda::Stream stream;
  auto run = [&] {
    d_out.poison();
    d_dexpert.poison();
    d_dprobs.poison();
    kernels::moe_combine_forward(stream, {.out = d_out.get(),
                                          .expert_out = d_expert_out.get(),
                                          .probs = d_probs.get(),
                                          .slot_to_row = d_slot_to_row.get(),
                                          .T = c.T,
                                          .k = c.k,
                                          .H = H});
    kernels::moe_combine_backward(stream, {.dexpert_out = d_dexpert.get(),
                                           .dprobs = d_dprobs.get(),
                                           .dout = d_dout.get(),
                                           .expert_out = d_expert_out.get(),
                                           .probs = d_probs.get(),
                                           .slot_to_row = d_slot_to_row.get(),
                                           .row_to_slot = d_row_to_slot.get(),
                                           .T = c.T,
                                           .k = c.k,
                                           .H = H,
                                           .rows = rows});
    device_sync();
  };
  run();
  const auto out = d_out.download();
  const auto dexpert = d_dexpert.download();
  const auto dprobs = d_dprobs.download();
  EXPECT_LT(relative_error(to_float(out), out_ref), kBf16RelTol);
  EXPECT_LT(relative_error(to_float(dexpert), dexpert_ref), kBf16RelTol);
  EXPECT_LT(relative_error(dprobs, dprobs_ref), kDotRelTol);
  const auto dexpert_f = to_float(dexpert);
  int64_t dropped = 0, padding = 0;
  for (int64_t s = 0; s < slots; ++s) {
    if (perm.slot_to_row[s] >= 0) continue;
    ++dropped;
    EXPECT_EQ(dprobs[s], 0.0f) << "dropped slot " << s;
  }
  for (int64_t r = 0; r < rows; ++r) {
    if (perm.row_to_slot[r] >= 0) continue;
    ++padding;
    for (int64_t h = 0; h < H; ++h) ASSERT_EQ(dexpert_f[r * H + h], 0.0f) << "padding row " << r;
  }
  // A capacity of T keeps every slot (the "never drop" factors): only a smaller one must drop or pad.
  if (c.capacity_factor > 0 && d.capacity < c.T) EXPECT_GT(dropped + padding, 0) << "the case should drop or pad";
  if (d.capacity >= c.T) EXPECT_EQ(dropped, 0) << "a capacity of T drops nothing";
  run();
  EXPECT_TRUE(same_bits(d_out.download(), out));
  EXPECT_TRUE(same_bits(d_dexpert.download(), dexpert));
  EXPECT_TRUE(same_bits(d_dprobs.download(), dprobs));
}

INSTANTIATE_TEST_SUITE_P(Cases, MoeCombineGpu, ::testing::ValuesIn(kMoeDispatchCases),
                         [](const auto& info) { return std::string(info.param.name); });

}  // namespace
