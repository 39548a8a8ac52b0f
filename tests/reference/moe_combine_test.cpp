// MoE combine reference: a hand-checked weighted sum with a dropped slot, and the backward (expert
// rows and probs) against fp64 central finite differences.
#include "reference/moe_combine.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "finite_differences.h"
#include "test_util.h"

namespace sg {
namespace {

TEST(MoeCombineReference, WeightedSumInSlotOrderSkipsDroppedSlots) {
  // T = 2, k = 2, H = 2; rows {1, 2}, {3, 4}, {5, 6}.
  const std::vector<float> rows = {1, 2, 3, 4, 5, 6};
  const std::vector<float> probs = {0.25f, 0.75f, 0.5f, 0.5f};
  const std::vector<int32_t> slot_to_row = {1, 0, 2, -1};
  std::vector<float> out(4, NAN);
  ref::moe_combine_forward<float>(out.data(), rows.data(), probs.data(), slot_to_row.data(), 2, 2, 2);
  EXPECT_EQ(out, (std::vector<float>{0.25f * 3 + 0.75f * 1, 0.25f * 4 + 0.75f * 2, 2.5f, 3.0f}));
}

TEST(MoeCombineReference, BackwardMatchesFiniteDifferencesFp64) {
  // T = 3, k = 2, H = 4; 5 rows of which row 4 is padding, slot 5 dropped.
  const int64_t T = 3, k = 2, H = 4, rows = 5;
  const std::vector<int32_t> slot_to_row = {2, 0, 3, 1, -1, -1};
  const std::vector<int32_t> row_to_slot = {1, 3, 0, 2, -1};
  const auto ef = test::random_normal(rows * H, 61);
  const auto pf = test::random_normal(T * k, 62);
  const auto gf = test::random_normal(T * H, 63);
  std::vector<double> expert_out(ef.begin(), ef.end()), probs(pf.begin(), pf.end()), g(gf.begin(), gf.end());
  auto loss = [&](const std::vector<double>& e, const std::vector<double>& p) {
    std::vector<double> out(T * H);
    ref::moe_combine_forward<double>(out.data(), e.data(), p.data(), slot_to_row.data(), T, k, H);
    double l = 0.0;
    for (int64_t i = 0; i < T * H; ++i) l += g[i] * out[i];
    return l;
  };
  std::vector<double> dexpert(rows * H, 99.0), dprobs(T * k, 99.0);
  ref::moe_combine_backward<double>(dexpert.data(), dprobs.data(), g.data(), expert_out.data(), probs.data(),
                                    slot_to_row.data(), row_to_slot.data(), T, k, H, rows);
  test::expect_matches_finite_differences([&](const std::vector<double>& e) { return loss(e, probs); }, expert_out,
                                          dexpert, "dexpert_out");
  test::expect_matches_finite_differences([&](const std::vector<double>& p) { return loss(expert_out, p); }, probs,
                                          dprobs, "dprobs");
  EXPECT_EQ(dprobs[4], 0.0);  // dropped slots get an exact zero
  for (int64_t h = 0; h < H; ++h) EXPECT_EQ(dexpert[4 * H + h], 0.0);  // padding row
}

}  // namespace
}  // namespace sg
