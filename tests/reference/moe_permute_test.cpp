// MoE dispatch reference: capacity, hand-checked permutations (dropless, drop by position, drop by
// probs with ties, padding), the invariants of a permutation on random routings, and permute backward
// as the adjoint of the permute.
#include "reference/moe_permute.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <tuple>
#include <vector>

#include "test_util.h"

namespace sg {
namespace {

using ref::MoeDispatch;
using ref::MoeDropPolicy;
using V = std::vector<int32_t>;

TEST(MoePermuteReference, CapacityIsMegatronsCeil) {
  for (const bool pad : {false, true}) {  // below T: the same with and without padding
    EXPECT_EQ(ref::moe_expert_capacity(8, 2, 4, 1.0, pad), 4);
    EXPECT_EQ(ref::moe_expert_capacity(7, 1, 3, 1.0, pad), 3);   // ceil(2.33)
    EXPECT_EQ(ref::moe_expert_capacity(7, 2, 8, 1.25, pad), 3);  // ceil(1.75 * 1.25 = 2.19)
    EXPECT_EQ(ref::moe_expert_capacity(4096, 8, 128, 1.0, pad), 256);
    EXPECT_EQ(ref::moe_expert_capacity(16384, 2, 8, 3.999, pad), 16380);  // ceil(4096 * 3.999 = 16379.9), < T
    EXPECT_NE(
        test::thrown_message([pad] { ref::moe_expert_capacity(8, 2, 4, 0.0, pad); }).find("moe_expert_capacity_factor"),
        std::string::npos);
  }
  // Above T: padded groups keep Megatron's capacity (the padded shape); unpadded ones are clamped to T.
  EXPECT_EQ(ref::moe_expert_capacity(8, 2, 4, 3.0, true), 12);
  EXPECT_EQ(ref::moe_expert_capacity(8, 2, 4, 3.0, false), 8);
}

// T = 3, k = 2, E = 3. Slots: s0 t0->e0, s1 t0->e2, s2 t1->e2, s3 t1->e1, s4 t2->e0, s5 t2->e2.
const V kMap = {0, 2, 2, 1, 0, 2};

TEST(MoePermuteReference, DroplessGroupsByExpertInTokenOrder) {
  const auto p = ref::moe_preprocess(kMap.data(), nullptr, {.T = 3, .E = 3, .k = 2});
  EXPECT_EQ(p.kept_counts, (V{2, 1, 3}));
  EXPECT_EQ(p.expert_rows, (V{2, 1, 3}));
  EXPECT_EQ(p.expert_row_offsets, (V{0, 2, 3, 6}));
  EXPECT_EQ(p.row_to_slot, (V{0, 4, 3, 1, 2, 5}));
  EXPECT_EQ(p.slot_to_row, (V{0, 3, 4, 2, 1, 5}));
}

TEST(MoePermuteReference, DropByPositionKeepsTheFirstArrivals) {
  const MoeDispatch d{.T = 3, .E = 3, .k = 2, .capacity = 1, .drop_policy = MoeDropPolicy::position};
  const auto p = ref::moe_preprocess(kMap.data(), nullptr, d);
  EXPECT_EQ(p.kept_counts, (V{1, 1, 1}));
  EXPECT_EQ(p.expert_row_offsets, (V{0, 1, 2, 3}));
  EXPECT_EQ(p.row_to_slot, (V{0, 3, 1, -1, -1, -1}));  // T k rows, the tail unused
  EXPECT_EQ(p.slot_to_row, (V{0, 2, -1, 1, -1, -1}));
}

TEST(MoePermuteReference, DropByProbsKeepsTheLargestTiesToTheLowerToken) {
  const std::vector<float> probs = {0.9f, 0.2f, 0.7f, 0.5f, 0.1f, 0.7f};
  const MoeDispatch d{.T = 3, .E = 3, .k = 2, .capacity = 1, .drop_policy = MoeDropPolicy::probs};
  const auto p = ref::moe_preprocess(kMap.data(), probs.data(), d);
  // e0: s0 (0.9) over s4 (0.1); e1: s3; e2: s2 and s5 tie at 0.7 -> s2 (token 1 before token 2).
  EXPECT_EQ(p.row_to_slot, (V{0, 3, 2, -1, -1, -1}));
  EXPECT_EQ(p.slot_to_row, (V{0, -1, 2, 1, -1, -1}));
}

TEST(MoePermuteReference, DropByProbsWithPadPutsKeptSlotsBackInTokenOrder) {
  const std::vector<float> probs = {0.9f, 0.8f, 0.3f, 0.5f, 0.1f, 0.7f};
  const MoeDispatch d{.T = 3, .E = 3, .k = 2, .capacity = 2, .drop_policy = MoeDropPolicy::probs,
                      .pad_to_capacity = true};
  ASSERT_EQ(d.permuted_rows(), 6);
  const auto p = ref::moe_preprocess(kMap.data(), probs.data(), d);
  // e2 has s1 (0.8), s2 (0.3), s5 (0.7): keeps s1 and s5, in token order; e1 is padded.
  EXPECT_EQ(p.kept_counts, (V{2, 1, 2}));
  EXPECT_EQ(p.expert_rows, (V{2, 2, 2}));
  EXPECT_EQ(p.expert_row_offsets, (V{0, 2, 4, 6}));
  EXPECT_EQ(p.row_to_slot, (V{0, 4, 3, -1, 1, 5}));
  EXPECT_EQ(p.slot_to_row, (V{0, 4, -1, 2, 1, 5}));
}

TEST(MoePermuteReference, BadDispatchesNameTheKey) {
  EXPECT_NE(test::thrown_message([] {
              ref::moe_preprocess(kMap.data(), nullptr, {.T = 3, .E = 3, .k = 2, .pad_to_capacity = true});
            }).find("moe_pad_expert_input_to_capacity"),
            std::string::npos);
  const V bad = {0, 3};
  EXPECT_NE(test::thrown_message([&] { ref::moe_preprocess(bad.data(), nullptr, {.T = 1, .E = 3, .k = 2}); })
                .find("routing_map[1] = 3"),
            std::string::npos);
}

// A random top-k routing: k distinct experts per token, skewed towards the low experts.
V random_routing(int64_t T, int64_t E, int64_t k, uint64_t seed) {
  std::mt19937_64 gen(seed);
  V map(T * k);
  std::vector<int32_t> experts(E);
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t e = 0; e < E; ++e) experts[e] = static_cast<int32_t>(e);
    for (int64_t j = 0; j < k; ++j) {
      // Picks low indices more often: the minimum of two uniform draws among the remaining experts.
      std::uniform_int_distribution<int64_t> pick(j, E - 1);
      const int64_t i = std::min(pick(gen), pick(gen));
      std::swap(experts[j], experts[i]);
      map[t * k + j] = experts[j];
    }
  }
  return map;
}

// A "never drop" factor: ceil(T k / E x 1e9) is 4.1e12 for T = 16384, k = 2, E = 8, past int32 (the GPU plan
// kernel's capacity went negative and wrote at negative rows), and 1e300 is past int64 (the conversion was
// undefined). Unpadded, the capacity is clamped to T, and the permutation is the dropless one.
TEST(MoePermuteReference, HugeCapacityFactorsKeepEverySlotWithoutPadding) {
  const int64_t T = 16384, E = 8, k = 2;
  const V map = random_routing(T, E, k, 11);
  const auto probs = test::random_normal(T * k, 12);
  const auto dropless = ref::moe_preprocess(map.data(), probs.data(), {.T = T, .E = E, .k = k});
  for (const double factor : {1e9, 1e300, 4.0, 100.0}) {
    const int64_t capacity = ref::moe_expert_capacity(T, k, E, factor, false);
    EXPECT_EQ(capacity, T) << factor;
    for (const MoeDropPolicy policy : {MoeDropPolicy::probs, MoeDropPolicy::position}) {
      SCOPED_TRACE(testing::Message() << "factor=" << factor << " policy=" << static_cast<int>(policy));
      const auto p = ref::moe_preprocess(map.data(), probs.data(),
                                         {.T = T, .E = E, .k = k, .capacity = capacity, .drop_policy = policy});
      EXPECT_EQ(p.kept_counts, dropless.kept_counts);
      EXPECT_EQ(p.expert_rows, dropless.expert_rows);
      EXPECT_EQ(p.expert_row_offsets, dropless.expert_row_offsets);
      EXPECT_EQ(p.slot_to_row, dropless.slot_to_row);
      EXPECT_EQ(p.row_to_slot, dropless.row_to_slot);
    }
  }
}

// Padded, the capacity is the groups' rows: too many for int32 row ids is refused (validation says so first,
// naming the factor), whatever the factor.
TEST(MoePermuteReference, HugePaddedCapacitiesAreRefused) {
  const int64_t T = 16384, E = 8, k = 2;
  EXPECT_EQ(ref::moe_expert_capacity(T, k, E, 1e9, true), int64_t{4096} * 1000000000);
  EXPECT_EQ(ref::moe_expert_capacity(T, k, E, 1e300, true), int64_t{1} << 62);  // saturated, converted
  const V map(T * k, 0);
  for (const double factor : {1e9, 1e300}) {
    const MoeDispatch d{
        .T = T, .E = E, .k = k, .capacity = ref::moe_expert_capacity(T, k, E, factor, true), .pad_to_capacity = true};
    const std::string message = test::thrown_message([&] { ref::moe_preprocess(map.data(), nullptr, d); });
    EXPECT_NE(message.find("exceeds 2^31 - 1"), std::string::npos) << message;
    EXPECT_NE(message.find("moe_expert_capacity_factor"), std::string::npos) << message;
  }
  // Below 2^31 per expert but not in all: the padded rows are refused too (2^28 x 8 = 2^31).
  const MoeDispatch rows{.T = T, .E = E, .k = k, .capacity = int64_t{1} << 28, .pad_to_capacity = true};
  const std::string message = test::thrown_message([&] { ref::moe_preprocess(map.data(), nullptr, rows); });
  EXPECT_NE(message.find("padded E capacity = 8 x 268435456"), std::string::npos) << message;
  // The largest that fits: (2^31 - 1) / 8 rows per expert.
  EXPECT_NO_THROW(
      ref::check_moe_dispatch({.T = T, .E = E, .k = k, .capacity = INT32_MAX / 8, .pad_to_capacity = true}, "test"));
}

TEST(MoePermuteReference, RandomRoutingsGiveConsistentPermutations) {
  const std::vector<std::tuple<int64_t, int64_t, int64_t>> shapes = {{37, 8, 2}, {50, 5, 3}, {16, 1, 1}};
  for (const auto& [T, E, k] : shapes) {
    const V map = random_routing(T, E, k, 3 + T);
    const auto probs = test::random_normal(T * k, 4 + T);
    const int64_t cap = ref::moe_expert_capacity(T, k, E, 0.8, false);
    for (const MoeDispatch& d : {MoeDispatch{.T = T, .E = E, .k = k},
                                 MoeDispatch{.T = T, .E = E, .k = k, .capacity = cap},
                                 MoeDispatch{.T = T, .E = E, .k = k, .capacity = cap,
                                             .drop_policy = MoeDropPolicy::position, .pad_to_capacity = true}}) {
      SCOPED_TRACE(testing::Message() << "T=" << T << " E=" << E << " k=" << k << " capacity=" << d.capacity);
      const auto p = ref::moe_preprocess(map.data(), probs.data(), d);
      int64_t kept_total = 0;
      for (int64_t e = 0; e < E; ++e) {
        const int64_t count = std::count(map.begin(), map.end(), e);
        EXPECT_EQ(p.kept_counts[e], d.dropless() ? count : std::min(count, d.capacity));
        kept_total += p.kept_counts[e];
        int32_t previous = -1;
        for (int32_t r = p.expert_row_offsets[e]; r < p.expert_row_offsets[e] + p.kept_counts[e]; ++r) {
          const int32_t s = p.row_to_slot[r];
          ASSERT_GE(s, 0);
          EXPECT_EQ(map[s], e);
          EXPECT_EQ(p.slot_to_row[s], r);
          EXPECT_GT(s, previous);  // token order within the expert
          previous = s;
        }
      }
      EXPECT_EQ(std::count_if(p.slot_to_row.begin(), p.slot_to_row.end(), [](int32_t r) { return r >= 0; }),
                kept_total);
      if (d.dropless()) {
        EXPECT_EQ(kept_total, T * k);
      }
    }
  }
}

TEST(MoePermuteReference, PermuteBackwardIsTheAdjointOfThePermute) {
  const int64_t T = 9, E = 4, k = 2, H = 5;
  const V map = random_routing(T, E, k, 77);
  const auto probs = test::random_normal(T * k, 78);
  const MoeDispatch d{.T = T, .E = E, .k = k, .capacity = 3, .pad_to_capacity = true};
  const auto p = ref::moe_preprocess(map.data(), probs.data(), d);
  const int64_t rows = d.permuted_rows();
  const auto hidden = test::random_normal(T * H, 79);
  const auto g = test::random_normal(rows * H, 80);
  std::vector<float> permuted(rows * H, NAN), dhidden(T * H, NAN);
  ref::moe_permute_forward(permuted.data(), hidden.data(), p.row_to_slot.data(), rows, k, H);
  ref::moe_permute_backward(dhidden.data(), g.data(), p.slot_to_row.data(), T, k, H);
  for (int64_t r = 0; r < rows; ++r) {
    const int32_t s = p.row_to_slot[r];
    for (int64_t h = 0; h < H; ++h) EXPECT_EQ(permuted[r * H + h], s < 0 ? 0.0f : hidden[(s / k) * H + h]);
  }
  double lhs = 0.0, rhs = 0.0;  // <permute(hidden), g> = <hidden, permute_backward(g)>
  for (int64_t i = 0; i < rows * H; ++i) lhs += static_cast<double>(permuted[i]) * g[i];
  for (int64_t i = 0; i < T * H; ++i) rhs += static_cast<double>(hidden[i]) * dhidden[i];
  EXPECT_NEAR(lhs, rhs, 1e-4 * (1.0 + std::fabs(lhs)));
}

}  // namespace
}  // namespace sg
