// MoE router reference: hand-checked routing, probs, losses and bias updates; every backward (probs,
// load-balancing loss, z-loss) against fp64 central finite differences.
#include "reference/moe_router.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "finite_differences.h"
#include "test_util.h"

namespace sg {
namespace {

using ref::MoeRouterLosses;
using ref::MoeRouting;
using ref::MoeScoreFunction;

std::vector<double> to_double(const std::vector<float>& v) { return {v.begin(), v.end()}; }

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double sqrtsoftplus(double x) {
  return std::sqrt(std::log1p(std::exp(x)));
}

TEST(MoeRouterReference, SoftmaxTop2RenormalisesOverTheChosenLogits) {
  const MoeRouting r{.T = 1, .E = 4, .k = 2};
  const std::vector<float> logits = {1.0f, 3.0f, 2.0f, 0.0f};
  std::vector<int32_t> map(2);
  std::vector<float> probs(2);
  ref::moe_router_forward(map.data(), probs.data(), logits.data(), nullptr, r);
  EXPECT_EQ(map, (std::vector<int32_t>{1, 2}));
  const double e = std::exp(1.0);
  EXPECT_NEAR(probs[0], e / (e + 1.0), 1e-6);
  EXPECT_NEAR(probs[1], 1.0 / (e + 1.0), 1e-6);
}

TEST(MoeRouterReference, TiesGoToTheLowerExpertAndNanLoses) {
  const MoeRouting r{.T = 2, .E = 5, .k = 3};
  const std::vector<float> logits = {1.0f, 2.0f, 1.0f, 2.0f, 1.0f,  //
                                     NAN, 0.5f, NAN, 0.5f, -1.0f};
  std::vector<int32_t> map(6);
  std::vector<float> probs(6);
  ref::moe_router_forward(map.data(), probs.data(), logits.data(), nullptr, r);
  EXPECT_EQ(std::vector<int32_t>(map.begin(), map.begin() + 3), (std::vector<int32_t>{1, 3, 0}));
  EXPECT_EQ(std::vector<int32_t>(map.begin() + 3, map.end()), (std::vector<int32_t>{1, 3, 4}));
}

TEST(MoeRouterReference, PreSoftmaxTakesFullSoftmaxAtTheChosenExperts) {
  const MoeRouting r{.T = 1, .E = 3, .k = 2, .pre_softmax = true, .scaling_factor = 2.0f};
  const std::vector<float> logits = {0.0f, std::log(2.0f), std::log(5.0f)};  // softmax = {1, 2, 5} / 8
  std::vector<int32_t> map(2);
  std::vector<float> probs(2);
  ref::moe_router_forward(map.data(), probs.data(), logits.data(), nullptr, r);
  EXPECT_EQ(map, (std::vector<int32_t>{2, 1}));
  EXPECT_NEAR(probs[0], 2.0 * 5.0 / 8.0, 1e-6);
  EXPECT_NEAR(probs[1], 2.0 * 2.0 / 8.0, 1e-6);
}

TEST(MoeRouterReference, SigmoidNormalisesOverTopKOnlyWhenKAboveOne) {
  const std::vector<float> logits = {0.5f, -1.0f, 2.0f};
  std::vector<int32_t> map(2);
  std::vector<float> probs(2);
  ref::moe_router_forward(map.data(), probs.data(), logits.data(), nullptr,
                          {.T = 1, .E = 3, .k = 2, .score_function = MoeScoreFunction::sigmoid, .scaling_factor = 2.5f});
  EXPECT_EQ(map, (std::vector<int32_t>{2, 0}));
  const double s2 = sigmoid(2.0), s0 = sigmoid(0.5);
  EXPECT_NEAR(probs[0], 2.5 * s2 / (s2 + s0), 1e-6);
  EXPECT_NEAR(probs[1], 2.5 * s0 / (s2 + s0), 1e-6);
  ref::moe_router_forward(map.data(), probs.data(), logits.data(), nullptr,
                          {.T = 1, .E = 3, .k = 1, .score_function = MoeScoreFunction::sigmoid});
  EXPECT_EQ(map[0], 2);
  EXPECT_NEAR(probs[0], s2, 1e-6);
}

// sqrtsoftplus (DeepSeek-V4's sqrt(softplus(logit))) routes as sigmoid does (Megatron): the top-k scores over their
// sum when k > 1, the raw score when k = 1, times the scaling factor; torch's softplus is x itself above 20.
TEST(MoeRouterReference, SqrtSoftplusIsRoutedAsSigmoidIs) {
  const std::vector<float> logits = {0.5f, -1.0f, 2.0f, 25.0f, -3.0f};
  std::vector<int32_t> map(2);
  std::vector<float> probs(2);
  ref::moe_router_forward(
      map.data(), probs.data(), logits.data(), nullptr,
      {.T = 1, .E = 5, .k = 2, .score_function = MoeScoreFunction::sqrtsoftplus, .scaling_factor = 2.5f});
  EXPECT_EQ(map, (std::vector<int32_t>{3, 2}));
  const double s25 = std::sqrt(25.0), s2 = sqrtsoftplus(2.0);
  EXPECT_NEAR(probs[0], 2.5 * s25 / (s25 + s2), 1e-6);
  EXPECT_NEAR(probs[1], 2.5 * s2 / (s25 + s2), 1e-6);
  ref::moe_router_forward(map.data(), probs.data(), logits.data() + 1, nullptr,
                          {.T = 1, .E = 2, .k = 1, .score_function = MoeScoreFunction::sqrtsoftplus});
  EXPECT_EQ(map[0], 1);
  EXPECT_NEAR(probs[0], s2, 1e-6);
  // The expert bias is allowed with it, and steers the choice only: sqrtsoftplus(-1) + 2 > sqrtsoftplus(2).
  const std::vector<float> bias = {2.0f, 0.0f};
  ref::moe_router_forward(map.data(), probs.data(), logits.data() + 1, bias.data(),
                          {.T = 1, .E = 2, .k = 1, .score_function = MoeScoreFunction::sqrtsoftplus});
  EXPECT_EQ(map[0], 0);
  EXPECT_NEAR(probs[0], sqrtsoftplus(-1.0), 1e-6);
}

// Where softplus underflows (a logit below about -745 in fp64, -104 in fp32) the score is 0 and so is its gradient
// (the limit of sigmoid(x) / (2 sqrt(softplus(x)))), not 0/0.
TEST(MoeRouterReference, SqrtSoftplusGradientIsZeroWhereTheScoreUnderflows) {
  const MoeRouting r{.T = 1, .E = 3, .k = 2, .score_function = MoeScoreFunction::sqrtsoftplus};
  const std::vector<float> logits = {1.0f, -200.0f, 0.5f};
  std::vector<int32_t> map(2);
  std::vector<float> probs(2), dlogits(3, 7.0f);
  ref::moe_router_forward(map.data(), probs.data(), logits.data(), nullptr, r);
  const std::vector<float> g = {1.0f, -2.0f};
  ref::moe_router_backward(dlogits.data(), g.data(), logits.data(), map.data(), r);
  for (float d : dlogits) EXPECT_TRUE(std::isfinite(d)) << d;
  EXPECT_EQ(dlogits[1], 0.0f);
  const MoeRouterLosses l{.aux_coeff = 0.1f};
  std::vector<int32_t> counts(3);
  ref::moe_count_experts(counts.data(), map.data(), 1, 2, 3, 1);
  ref::moe_aux_loss_backward<float>(dlogits.data(), logits.data(), counts.data(), r, l, 1.0);
  for (float d : dlogits) EXPECT_TRUE(std::isfinite(d)) << d;
  EXPECT_EQ(dlogits[1], 0.0f);
}

TEST(MoeRouterReference, ExpertBiasSteersSelectionButNotProbs) {
  const MoeRouting r{.T = 1, .E = 3, .k = 1, .score_function = MoeScoreFunction::sigmoid};
  const std::vector<float> logits = {2.0f, 1.0f, 0.0f};
  const std::vector<float> bias = {0.0f, 0.0f, 0.5f};  // sigmoid(0) + 0.5 = 1.0 > sigmoid(2) = 0.88
  std::vector<int32_t> map(1);
  std::vector<float> probs(1);
  ref::moe_router_forward(map.data(), probs.data(), logits.data(), bias.data(), r);
  EXPECT_EQ(map[0], 2);
  EXPECT_NEAR(probs[0], 0.5, 1e-7);
  MoeRouting softmax = r;
  softmax.score_function = MoeScoreFunction::softmax;
  EXPECT_NE(test::thrown_message([&] {
              ref::moe_router_forward(map.data(), probs.data(), logits.data(), bias.data(), softmax);
            }).find("sigmoid"),
            std::string::npos);
}

TEST(MoeRouterReference, BadConfigurationsNameTheKey) {
  std::vector<int32_t> map(8);
  std::vector<float> probs(8), logits(8);
  auto run = [&](const MoeRouting& r) {
    return test::thrown_message([&] { ref::moe_router_forward(map.data(), probs.data(), logits.data(), nullptr, r); });
  };
  EXPECT_NE(run({.T = 1, .E = 2, .k = 3}).find("moe_router_topk=3"), std::string::npos);
  EXPECT_NE(run({.T = 1, .E = 2, .k = 1, .score_function = MoeScoreFunction::sigmoid, .pre_softmax = true})
                .find("moe_router_pre_softmax"),
            std::string::npos);
  EXPECT_NE(run({.T = 1, .E = 2000, .k = 1}).find("num_moe_experts=2000"), std::string::npos);
  EXPECT_NE(run({.T = 1, .E = 2, .k = 1, .scaling_factor = 0.0f}).find("moe_router_topk_scaling_factor"),
            std::string::npos);
}

// The routers to check the backward of: every score function / normalisation, with scaling.
const MoeRouting kRouters[] = {
    {.T = 5, .E = 6, .k = 2, .score_function = MoeScoreFunction::softmax, .scaling_factor = 1.5f},
    {.T = 5, .E = 6, .k = 1, .score_function = MoeScoreFunction::softmax},
    {.T = 5, .E = 6, .k = 3, .score_function = MoeScoreFunction::softmax, .pre_softmax = true, .scaling_factor = 2.0f},
    {.T = 5, .E = 6, .k = 3, .score_function = MoeScoreFunction::sigmoid, .scaling_factor = 2.5f},
    {.T = 5, .E = 6, .k = 1, .score_function = MoeScoreFunction::sigmoid},
    {.T = 5, .E = 6, .k = 3, .score_function = MoeScoreFunction::sqrtsoftplus, .scaling_factor = 2.5f},
    {.T = 5, .E = 6, .k = 1, .score_function = MoeScoreFunction::sqrtsoftplus},
};

TEST(MoeRouterReference, ProbsBackwardMatchesFiniteDifferencesFp64) {
  for (const MoeRouting& r : kRouters) {
    SCOPED_TRACE(testing::Message() << ref::moe_score_function_name(r.score_function) << " k=" << r.k
                                    << " pre=" << r.pre_softmax);
    const auto logits = to_double(test::random_normal(r.T * r.E, 7 + r.k, 1.5f));
    const auto g = to_double(test::random_normal(r.T * r.k, 8 + r.k));
    std::vector<int32_t> map(r.T * r.k);
    std::vector<double> probs(r.T * r.k);
    ref::moe_router_forward_generic<double>(map.data(), probs.data(), logits.data(), nullptr, r);
    auto loss = [&](const std::vector<double>& x) {
      std::vector<int32_t> m(r.T * r.k);
      std::vector<double> p(r.T * r.k);
      ref::moe_router_forward_generic<double>(m.data(), p.data(), x.data(), nullptr, r);
      EXPECT_EQ(m, map) << "a finite-difference step changed the routing";
      double l = 0.0;
      for (size_t i = 0; i < p.size(); ++i) l += g[i] * p[i];
      return l;
    };
    std::vector<double> dlogits(r.T * r.E, 99.0);
    ref::moe_router_backward_generic<double>(dlogits.data(), g.data(), logits.data(), map.data(), r);
    test::expect_matches_finite_differences(loss, logits, dlogits, "dlogits");
  }
}

TEST(MoeRouterReference, Fp32MatchesFp64) {
  for (const MoeRouting& r : kRouters) {
    const auto logits = test::random_normal(r.T * r.E, 17, 2.0f);
    const auto g = test::random_normal(r.T * r.k, 18);
    std::vector<int32_t> map(r.T * r.k), map64(r.T * r.k);
    std::vector<float> probs(r.T * r.k), dlogits(r.T * r.E);
    std::vector<double> probs64(r.T * r.k), dlogits64(r.T * r.E);
    ref::moe_router_forward(map.data(), probs.data(), logits.data(), nullptr, r);
    ref::moe_router_forward_generic<double>(map64.data(), probs64.data(), to_double(logits).data(), nullptr, r);
    EXPECT_EQ(map, map64);
    ref::moe_router_backward(dlogits.data(), g.data(), logits.data(), map.data(), r);
    ref::moe_router_backward_generic<double>(dlogits64.data(), to_double(g).data(), to_double(logits).data(),
                                             map.data(), r);
    // fp32 rounding of the scores, amplified by the cancellation in (g - <g, s>): a few ulps.
    EXPECT_LT(test::relative_error(probs, std::vector<float>(probs64.begin(), probs64.end())), 1e-6);
    EXPECT_LT(test::relative_error(dlogits, std::vector<float>(dlogits64.begin(), dlogits64.end())), 1e-5);
  }
}

TEST(MoeRouterReference, CountsPerExpertAndPerGroup) {
  // T = 4, k = 2, E = 3, two groups of two tokens.
  const std::vector<int32_t> map = {0, 2, 2, 1, 0, 1, 0, 2};
  std::vector<int32_t> counts(3), grouped(6);
  ref::moe_count_experts(counts.data(), map.data(), 4, 2, 3, 4);
  EXPECT_EQ(counts, (std::vector<int32_t>{3, 2, 3}));
  ref::moe_count_experts(grouped.data(), map.data(), 4, 2, 3, 2);
  EXPECT_EQ(grouped, (std::vector<int32_t>{1, 1, 2, 2, 1, 1}));
}

TEST(MoeRouterReference, SwitchLossHandValue) {
  // t0 scores {3/4, 1/4}, t1 {1/2, 1/2}; counts {2, 0}: loss = c E / (k T^2) * (2 * 5/4) = 1.25 c.
  const MoeRouting r{.T = 2, .E = 2, .k = 1};
  const std::vector<float> logits = {std::log(3.0f), 0.0f, 0.0f, 0.0f};
  const std::vector<int32_t> counts = {2, 0};
  EXPECT_NEAR(ref::moe_aux_loss<float>(logits.data(), counts.data(), r, {.aux_coeff = 0.01f}), 0.0125, 1e-8);
}

TEST(MoeRouterReference, SeqAuxLossIsTheMeanOfPerSequenceSwitchLosses) {
  const int64_t B = 3, S = 5, E = 4, k = 2;
  for (auto fn : {MoeScoreFunction::softmax, MoeScoreFunction::sigmoid, MoeScoreFunction::sqrtsoftplus}) {
    const MoeRouting r{.T = B * S, .E = E, .k = k, .score_function = fn};
    const auto logits = test::random_normal(r.T * E, 31, 2.0f);
    std::vector<int32_t> map(r.T * k), counts(B * E);
    std::vector<float> probs(r.T * k);
    ref::moe_router_forward(map.data(), probs.data(), logits.data(), nullptr, r);
    ref::moe_count_experts(counts.data(), map.data(), r.T, k, E, S);
    const MoeRouterLosses seq{.aux_coeff = 0.1f, .aux_group_tokens = S};
    const double loss = ref::moe_aux_loss<float>(logits.data(), counts.data(), r, seq);
    double mean = 0.0;
    for (int64_t b = 0; b < B; ++b) {
      const MoeRouting one{.T = S, .E = E, .k = k, .score_function = fn};
      mean += ref::moe_aux_loss<float>(logits.data() + b * S * E, counts.data() + b * E, one, {.aux_coeff = 0.1f}) / B;
    }
    EXPECT_NEAR(loss, mean, 1e-9);
    EXPECT_GT(loss, 0.0);
  }
}

TEST(MoeRouterReference, AuxLossBackwardMatchesFiniteDifferencesFp64) {
  for (auto fn : {MoeScoreFunction::softmax, MoeScoreFunction::sigmoid, MoeScoreFunction::sqrtsoftplus}) {
    for (int64_t group : {int64_t{0}, int64_t{3}}) {
      SCOPED_TRACE(testing::Message() << ref::moe_score_function_name(fn) << " group=" << group);
      const MoeRouting r{.T = 6, .E = 5, .k = 2, .score_function = fn};
      const MoeRouterLosses l{.aux_coeff = 0.3f, .aux_group_tokens = group};
      const auto logits = to_double(test::random_normal(r.T * r.E, 41, 1.5f));
      std::vector<int32_t> map(r.T * r.k), counts(l.groups(r.T) * r.E);
      std::vector<double> probs(r.T * r.k);
      ref::moe_router_forward_generic<double>(map.data(), probs.data(), logits.data(), nullptr, r);
      ref::moe_count_experts(counts.data(), map.data(), r.T, r.k, r.E, l.group_tokens(r.T));
      const double grad_scale = 0.5;
      auto loss = [&](const std::vector<double>& x) {
        return grad_scale * ref::moe_aux_loss<double>(x.data(), counts.data(), r, l);
      };
      std::vector<double> dlogits(r.T * r.E, 0.25);  // backward adds: start from a known offset
      ref::moe_aux_loss_backward<double>(dlogits.data(), logits.data(), counts.data(), r, l, grad_scale);
      for (auto& d : dlogits) d -= 0.25;
      test::expect_matches_finite_differences(loss, logits, dlogits, "dlogits");
    }
  }
}

TEST(MoeRouterReference, ZLossHandValueAndBackward) {
  const MoeRouting r{.T = 3, .E = 4, .k = 1};
  const std::vector<float> zeros(r.T * r.E, 0.0f);  // lse = ln 4 for every token
  EXPECT_NEAR(ref::moe_z_loss<float>(zeros.data(), r, {.z_coeff = 0.001f}), 0.001 * std::pow(std::log(4.0), 2), 1e-9);
  const MoeRouterLosses l{.z_coeff = 0.2f};
  const auto logits = to_double(test::random_normal(r.T * r.E, 51, 2.0f));
  auto loss = [&](const std::vector<double>& x) { return 0.25 * ref::moe_z_loss<double>(x.data(), r, l); };
  std::vector<double> dlogits(r.T * r.E, 0.0);
  ref::moe_z_loss_backward<double>(dlogits.data(), logits.data(), r, l, 0.25);
  test::expect_matches_finite_differences(loss, logits, dlogits, "dlogits");
}

TEST(MoeRouterReference, LossGroupMustDivideTheTokens) {
  const MoeRouting r{.T = 10, .E = 2, .k = 1};
  const std::vector<float> logits(20, 0.0f);
  const std::vector<int32_t> counts(10, 0);
  const auto message = test::thrown_message(
      [&] { ref::moe_aux_loss<float>(logits.data(), counts.data(), r, {.aux_coeff = 1.0f, .aux_group_tokens = 4}); });
  EXPECT_NE(message.find("seq_length"), std::string::npos) << message;
}

TEST(MoeRouterReference, ExpertBiasSignUpdateAndReset) {
  std::vector<float> bias = {0.5f, 0.5f, 0.5f, 0.5f};
  std::vector<int32_t> counts = {3, 1, 2, 2};  // mean 2
  ref::moe_expert_bias_update(bias.data(), counts.data(), 4, 0.01f);
  EXPECT_EQ(bias, (std::vector<float>{0.5f - 0.01f, 0.5f + 0.01f, 0.5f, 0.5f}));
  EXPECT_EQ(counts, (std::vector<int32_t>{0, 0, 0, 0}));
  std::vector<int32_t> uneven = {1, 1, 2};  // mean 4/3: exactly no expert sits at the mean
  std::vector<float> b3 = {0.0f, 0.0f, 0.0f};
  ref::moe_expert_bias_update(b3.data(), uneven.data(), 3, 0.001f);
  EXPECT_EQ(b3, (std::vector<float>{0.001f, 0.001f, -0.001f}));
}

}  // namespace
}  // namespace sg
