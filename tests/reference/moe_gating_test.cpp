// reference/moe_gating.h, the CPU twin of kernels/moe_gating (checked against the kernel only by
// tests/kernels/moe_gating_gpu_test.cpp): its own contract, on the CPU.
// Note: the twin is not the router (top-k, score functions, expert bias, group-limited routing are
// reference/moe_router.h's, tested in moe_router_test.cpp); it is the input gradient of the router's fp32
// gating linear, logits = x Wg^T, and a plain gradient add. Checked here:
//   * the layouts (dx, x [T, H]; dlogits [T, E]; Wg [E, H]) and the sum over experts, on a hand-checked case;
//   * dx is accumulated into, never overwritten, and each row's sum starts from 0 and is added to dx once;
//   * the sum is fmaf in expert order (the GPU's order, which the GPU test compares bitwise): cases whose
//     fp32 result differs under another order, a separate multiply and add, or accumulation into dx;
//   * it is the gradient of sum(dlogits * x Wg^T) (the adjoint identity against an independent fp64 product);
//   * zero tokens, zero experts, all-zero dlogits rows (dropped tokens) leave dx as it was;
//   * moe_gating_add_grad adds exactly n elements.
#include "reference/moe_gating.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "test_util.h"

namespace sg {
namespace {

bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(MoeGatingReference, HandCheckedSumOverExperts) {
  // T = 2 tokens, E = 3 experts, H = 2; small integers, so every sum is exact.
  const std::vector<float> dlogits = {1,  2, 3,   // token 0
                                      -1, 0, 2};  // token 1
  const std::vector<float> w = {1, 10,            // expert 0
                                2, 20,            // expert 1
                                3, 30};           // expert 2
  std::vector<float> dx = {100, 200, 300, 400};   // accumulated into
  ref::moe_gating_backward_input(dx.data(), dlogits.data(), w.data(), 2, 3, 2);
  // token 0: 1*(1,10) + 2*(2,20) + 3*(3,30) = (14, 140); token 1: -1*(1,10) + 2*(3,30) = (5, 50).
  EXPECT_EQ(dx, (std::vector<float>{114, 340, 305, 450}));
}

TEST(MoeGatingReference, OneExpertIsAScaledRow) {
  const std::vector<float> dlogits = {2, -0.5f, 0};
  const std::vector<float> w = {1, -2, 4, 8};  // E = 1, H = 4
  std::vector<float> dx(12, 1.0f);
  ref::moe_gating_backward_input(dx.data(), dlogits.data(), w.data(), 3, 1, 4);
  EXPECT_EQ(dx, (std::vector<float>{3, -3, 9, 17, 0.5f, 2, -1, -3, 1, 1, 1, 1}));
}

// fp32, hand-checked: the order matters. dlogits (1, 1e8, -1e8) against w = 1: in expert order from 0,
// 1 + 1e8 rounds to 1e8 (fp32's spacing there is 8), then - 1e8 gives 0. The exact sum, and the reverse
// order (-1e8 + 1e8 + 1), give 1.
TEST(MoeGatingReference, SumsInExpertOrder) {
  const std::vector<float> dlogits = {1.0f, 1e8f, -1e8f};
  const std::vector<float> w = {1.0f, 1.0f, 1.0f};  // E = 3, H = 1
  std::vector<float> dx = {0.0f};
  ref::moe_gating_backward_input(dx.data(), dlogits.data(), w.data(), 1, 3, 1);
  EXPECT_EQ(dx[0], 0.0f) << "not summed in expert order";
  // Reversed experts: the same numbers in the order (-1e8, 1e8, 1) give 1.
  const std::vector<float> reversed = {-1e8f, 1e8f, 1.0f};
  dx = {0.0f};
  ref::moe_gating_backward_input(dx.data(), reversed.data(), w.data(), 1, 3, 1);
  EXPECT_EQ(dx[0], 1.0f);
}

// fp32, hand-checked: each term is fused. Expert 0 puts -(1 + 2^-11) in the sum (exact); expert 1 adds
// (1 + 2^-12)^2 = 1 + 2^-11 + 2^-24. Fused, the sum is exactly 2^-24; with the product rounded first
// (to 1 + 2^-11: the 2^-24 is half an ulp, ties to even) it would be 0.
TEST(MoeGatingReference, EachTermIsAFusedMultiplyAdd) {
  const float a = 1.0f + std::ldexp(1.0f, -12);
  const std::vector<float> dlogits = {-1.0f, a};
  const std::vector<float> w = {1.0f + std::ldexp(1.0f, -11), a};  // E = 2, H = 1
  std::vector<float> dx = {0.0f};
  ref::moe_gating_backward_input(dx.data(), dlogits.data(), w.data(), 1, 2, 1);
  EXPECT_EQ(dx[0], std::ldexp(1.0f, -24));
}

// The row's sum starts from 0 and is added to dx once: from dx = 1e8, eight terms of 1 give 1e8 + 8
// (representable); adding them to dx one by one would round each back to 1e8.
TEST(MoeGatingReference, TheSumStartsFromZeroAndIsAddedOnce) {
  const int64_t E = 8;
  const std::vector<float> dlogits(E, 1.0f), w(E, 1.0f);  // H = 1
  std::vector<float> dx = {1e8f};
  ref::moe_gating_backward_input(dx.data(), dlogits.data(), w.data(), 1, E, 1);
  EXPECT_EQ(dx[0], 100000008.0f);
}

// Against an independent computation of the same order on random data (fmaf over experts from 0 per
// element, then one add), bitwise: odd sizes, dx non-zero, a dropped token's all-zero row.
TEST(MoeGatingReference, RandomShapesMatchAnIndependentSumBitwise) {
  struct Shape {
    int64_t T, E, H;
  };
  for (const Shape s : {Shape{1, 1, 1}, Shape{3, 5, 7}, Shape{17, 8, 33}, Shape{6, 64, 16}}) {
    SCOPED_TRACE(::testing::Message() << s.T << "x" << s.E << "x" << s.H);
    const uint64_t seed = static_cast<uint64_t>(s.T * 1000 + s.E * 10 + s.H);
    std::vector<float> dlogits = test::random_normal(static_cast<size_t>(s.T * s.E), seed, 0.01f);
    if (s.T > 2) std::fill_n(dlogits.begin() + s.E, s.E, 0.0f);  // token 1 dropped
    const std::vector<float> w = test::random_normal(static_cast<size_t>(s.E * s.H), seed + 1, 0.05f);
    const std::vector<float> dx0 = test::random_normal(static_cast<size_t>(s.T * s.H), seed + 2);
    std::vector<float> expected = dx0;
    for (int64_t t = 0; t < s.T; ++t) {
      for (int64_t h = 0; h < s.H; ++h) {
        float acc = 0.0f;
        for (int64_t e = 0; e < s.E; ++e) acc = std::fmaf(dlogits[t * s.E + e], w[e * s.H + h], acc);
        expected[t * s.H + h] += acc;
      }
    }
    std::vector<float> dx = dx0;
    ref::moe_gating_backward_input(dx.data(), dlogits.data(), w.data(), s.T, s.E, s.H);
    EXPECT_TRUE(bitwise_equal(dx, expected));
    if (s.T > 2) {
      for (int64_t h = 0; h < s.H; ++h) EXPECT_EQ(dx[s.H + h], dx0[s.H + h]) << "a dropped token's dx changed";
    }
  }
}

// It is the input gradient of L(x) = sum(dlogits * x Wg^T): for any direction v, <v, dx> equals the
// change of L along v, computed here in fp64 from the forward product (which the twin never forms).
TEST(MoeGatingReference, IsTheGradientOfTheGatingLinear) {
  const int64_t T = 9, E = 6, H = 11;
  const std::vector<float> dlogits = test::random_normal(T * E, 71);
  const std::vector<float> w = test::random_normal(E * H, 72);
  const std::vector<float> v = test::random_normal(T * H, 73);
  std::vector<float> dx(T * H, 0.0f);
  ref::moe_gating_backward_input(dx.data(), dlogits.data(), w.data(), T, E, H);
  double directional = 0.0;  // sum_{t,e} dlogits[t,e] * (v Wg^T)[t,e]
  for (int64_t t = 0; t < T; ++t) {
    for (int64_t e = 0; e < E; ++e) {
      double logit = 0.0;
      for (int64_t h = 0; h < H; ++h) logit += static_cast<double>(v[t * H + h]) * w[e * H + h];
      directional += static_cast<double>(dlogits[t * E + e]) * logit;
    }
  }
  double inner = 0.0, scale = 0.0;
  for (int64_t i = 0; i < T * H; ++i) {
    inner += static_cast<double>(v[i]) * dx[i];
    scale += std::fabs(static_cast<double>(v[i]) * dx[i]);
  }
  EXPECT_NEAR(inner, directional, 1e-5 * scale);
}

TEST(MoeGatingReference, NoTokensOrNoExpertsLeaveDxAsItWas) {
  std::vector<float> dx = {1, 2, 3, 4};
  const std::vector<float> w = {5, 6, 7, 8};
  ref::moe_gating_backward_input(dx.data(), nullptr, w.data(), 0, 2, 2);  // T = 0: nothing read or written
  EXPECT_EQ(dx, (std::vector<float>{1, 2, 3, 4}));
  ref::moe_gating_backward_input(dx.data(), nullptr, nullptr, 2, 0, 2);  // E = 0: an empty sum, dx += 0
  EXPECT_EQ(dx, (std::vector<float>{1, 2, 3, 4}));
  const std::vector<float> zeros(4, 0.0f);
  ref::moe_gating_backward_input(dx.data(), zeros.data(), w.data(), 2, 2, 2);  // every token dropped
  EXPECT_EQ(dx, (std::vector<float>{1, 2, 3, 4}));
}

TEST(MoeGatingReference, AddGradAddsExactlyNElements) {
  std::vector<float> dx = {1, 2, 3, 4, 5};
  const std::vector<float> add = {0.5f, -2, 1e-3f, 100, 7};
  ref::moe_gating_add_grad(dx.data(), add.data(), 4);
  EXPECT_EQ(dx, (std::vector<float>{1.5f, 0, 3 + 1e-3f, 104, 5}));  // the fifth untouched
  ref::moe_gating_add_grad(dx.data(), nullptr, 0);
  EXPECT_EQ(dx, (std::vector<float>{1.5f, 0, 3 + 1e-3f, 104, 5}));
}

}  // namespace
}  // namespace sg
