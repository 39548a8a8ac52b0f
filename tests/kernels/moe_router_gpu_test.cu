// GPU MoE router (forward, counts, aux / seq-aux / z-loss, backward, expert-bias update) against
// reference/moe_router on fresh random logits.
// Tolerances: integer outputs (routing maps, counts) exact; fp32 probs, losses and dlogits within a
// relative error of 1e-5 (same fp32 inputs, fp32 math in another summation order; the logits of a row
// are well separated, so rounding never changes a top-k); expert bias exact. Outputs are poisoned before
// each run, and every launch runs twice with bitwise identical results. The aux- and z-loss gradients are
// also checked alone (dprobs = 0, one loss at a time; aux within 5e-5): inside dlogits 1e-5 cannot see them.
// The selection rule (ties to the lower expert, NaN below every number) on logits with ties, NaN and
// saturated sigmoids: routing maps exact. Every score function: softmax, sigmoid and sqrtsoftplus.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "core/strings.h"
#include "cuda/stream.h"
#include "kernels/moe_router.h"
#include "moe_test_inputs.h"
#include "reference/moe_router.h"

namespace {

using namespace sg;
using namespace sg::test;
using ref::MoeRouterLosses;
using ref::MoeRouting;
using ref::MoeScoreFunction;

constexpr double kRouterRelTol = 1e-5;
// The aux-loss gradient alone, s (g - <g, s>): near-uniform counts cancel it up to 56x (softmax_E3_k2, counts 5 5 4),
// and fp32 rounding is relative to the terms: 3.6e-6 there on an H100, at most 1.6e-7 on the other cases.
constexpr double kAuxGradRelTol = 5e-5;

struct RouterCase {
  const char* name;
  MoeRouting routing;
  bool expert_bias = false;
  MoeLogitsOptions logits;
  MoeRouterLosses losses;
};

void PrintTo(const RouterCase& c, std::ostream* os) { *os << c.name; }

const RouterCase kCases[] = {
    {"one_expert", {.T = 1, .E = 1, .k = 1}, false, {}, {.aux_coeff = 0.01f, .z_coeff = 0.001f}},
    {"softmax_E3_k2", {.T = 7, .E = 3, .k = 2}, false, {}, {.aux_coeff = 0.01f}},
    {"sigmoid_bias_seq_aux", {.T = 33, .E = 8, .k = 2, .score_function = MoeScoreFunction::sigmoid},
     true, {}, {.aux_coeff = 0.1f, .aux_group_tokens = 11}},
    {"pre_softmax_k_equals_E", {.T = 257, .E = 8, .k = 8, .pre_softmax = true, .scaling_factor = 2.0f}, false, {},
     {.aux_coeff = 0.01f, .z_coeff = 0.001f}},
    {"softmax_E128_k8_skewed", {.T = 1001, .E = 128, .k = 8}, false, {.skew = 2.0f},
     {.aux_coeff = 0.01f, .z_coeff = 0.001f}},
    {"sigmoid_all_on_one_expert", {.T = 129, .E = 128, .k = 1, .score_function = MoeScoreFunction::sigmoid},
     false, {.one_expert = 77}, {.aux_coeff = 0.01f}},
    {"sigmoid_bias_E128_k8", {.T = 515, .E = 128, .k = 8, .score_function = MoeScoreFunction::sigmoid,
     .scaling_factor = 2.5f}, true, {.skew = 1.0f}, {.aux_coeff = 0.001f, .z_coeff = 0.01f}},
    {"pre_softmax_k1_many_chunks", {.T = 4097, .E = 8, .k = 1, .pre_softmax = true}, false, {.one_expert = 3},
     {.z_coeff = 0.001f}},
    {"seq_aux_E128_k2", {.T = 3 * 333, .E = 128, .k = 2}, false, {.skew = 3.0f},
     {.aux_coeff = 0.02f, .aux_group_tokens = 333, .z_coeff = 0.001f}},
    {"sqrtsoftplus_bias_seq_aux", {.T = 33, .E = 8, .k = 2, .score_function = MoeScoreFunction::sqrtsoftplus},
     true, {}, {.aux_coeff = 0.1f, .aux_group_tokens = 11}},
    {"sqrtsoftplus_bias_E128_k8", {.T = 515, .E = 128, .k = 8, .score_function = MoeScoreFunction::sqrtsoftplus,
     .scaling_factor = 2.5f}, true, {.skew = 1.0f}, {.aux_coeff = 0.001f, .z_coeff = 0.01f}},
    // One logit of each row past softplus's threshold of 20 (the score is sqrt(x) there).
    {"sqrtsoftplus_all_on_one_expert", {.T = 129, .E = 128, .k = 1,
     .score_function = MoeScoreFunction::sqrtsoftplus}, false, {.one_expert = 77},
     {.aux_coeff = 0.01f, .z_coeff = 0.001f}},
};

class MoeRouterGpu : public ::testing::TestWithParam<RouterCase> {};

TEST_P(MoeRouterGpu, MatchesReference) {
  const RouterCase& c = GetParam();
  const MoeRouting& r = c.routing;
  const MoeRouterLosses& l = c.losses;
  const int64_t T = r.T, E = r.E, k = r.k, G = l.groups(T);
  const uint64_t seed = 1000 + T * 7 + E * 3 + k;
  const auto logits = separated_logits(T, E, seed, c.logits);
  // Biases on a grid wider than the scores' range: sigmoid scores lie in (0.018, 0.982) and sqrtsoftplus scores in
  // (0.13, 2.6) for these logits, so the biased selection values stay well separated (a continuous bias could make
  // two of them meet within the ulps by which the GPU's expf and the host's may differ).
  const float bias_step = r.score_function == MoeScoreFunction::sqrtsoftplus ? 4.0f : 1.0f;
  std::vector<float> bias;
  if (c.expert_bias) {
    bias.resize(E);
    for (int64_t e = 0; e < E; ++e) bias[e] = bias_step * static_cast<float>((e * 5 + seed) % 3);
  }
  const auto dprobs = random_normal(T * k, seed + 2);
  // The loss sums start from a value the kernel must add to; small (2^-12, the order of the smallest case's
  // value_scale * aux loss), so the float sum keeps the added loss to 1e-5 of itself.
  const float grad_scale = 0.5f, value_scale = 0.25f, initial_sum = 1.0f / 4096.0f;

  // CPU twin.
  std::vector<int32_t> map_ref(T * k), aux_map_ref(T * k), counts_ref(E), aux_counts_ref(G * E);
  std::vector<float> probs_ref(T * k), dlogits_ref(T * E);
  std::vector<float> unbiased_probs(T * k);
  ref::moe_router_forward(map_ref.data(), probs_ref.data(), logits.data(), c.expert_bias ? bias.data() : nullptr, r);
  ref::moe_router_forward(aux_map_ref.data(), unbiased_probs.data(), logits.data(), nullptr, r);
  ref::moe_count_experts(counts_ref.data(), map_ref.data(), T, k, E, T);
  ref::moe_count_experts(aux_counts_ref.data(), aux_map_ref.data(), T, k, E, l.group_tokens(T));
  const double aux_ref = ref::moe_aux_loss<float>(logits.data(), aux_counts_ref.data(), r, l);
  const double z_ref = ref::moe_z_loss<float>(logits.data(), r, l);
  ref::moe_router_backward(dlogits_ref.data(), dprobs.data(), logits.data(), map_ref.data(), r);
  if (l.aux_coeff > 0.0f) {
    ref::moe_aux_loss_backward<float>(dlogits_ref.data(), logits.data(), aux_counts_ref.data(), r, l, grad_scale);
  }
  if (l.z_coeff > 0.0f) ref::moe_z_loss_backward<float>(dlogits_ref.data(), logits.data(), r, l, grad_scale);

  DeviceBuffer<float> d_logits(T * E), d_bias(E), d_probs(T * k), d_dprobs(T * k), d_dlogits(T * E), d_sums(2);
  DeviceBuffer<int32_t> d_map(T * k), d_aux_map(T * k), d_counts(E), d_aux_counts(G * E);
  DeviceBuffer<char> d_workspace(kernels::moe_router_loss_workspace_bytes(r, l));
  d_logits.upload(logits);
  if (c.expert_bias) d_bias.upload(bias);
  d_dprobs.upload(dprobs);
  cuda::Stream stream;

  struct Outputs {
    std::vector<int32_t> map, aux_map, counts, aux_counts;
    std::vector<float> probs, dlogits, sums;
  };
  auto run = [&] {
    for (auto* b : {&d_map, &d_aux_map, &d_counts, &d_aux_counts}) fill_bytes(*b, kPoisonIntByte);
    d_probs.poison();
    d_dlogits.poison();
    d_sums.upload({initial_sum, initial_sum});
    // Without a bias the aux loss counts the routing itself (the layer passes the same buffer).
    int32_t* aux_map = c.expert_bias ? d_aux_map.get() : d_map.get();
    kernels::moe_router_forward(stream, {.logits = d_logits.get(),
                                         .expert_bias = c.expert_bias ? d_bias.get() : nullptr,
                                         .routing_map = d_map.get(),
                                         .probs = d_probs.get(),
                                         .aux_routing_map = c.expert_bias ? d_aux_map.get() : nullptr,
                                         .routing = r});
    kernels::moe_count_experts(stream, {.routing_map = d_map.get(), .counts = d_counts.get(), .T = T, .E = E, .k = k});
    kernels::moe_count_experts(stream, {.routing_map = aux_map,
                                        .counts = d_aux_counts.get(),
                                        .T = T,
                                        .E = E,
                                        .k = k,
                                        .group_tokens = l.group_tokens(T)});
    kernels::moe_router_loss_forward(stream, {.logits = d_logits.get(),
                                              .aux_counts = d_aux_counts.get(),
                                              .routing = r,
                                              .losses = l,
                                              .workspace = d_workspace.get(),
                                              .aux_loss_sum = d_sums.get(),
                                              .z_loss_sum = d_sums.get() + 1,
                                              .value_scale = value_scale});
    kernels::moe_router_backward(stream, {.dlogits = d_dlogits.get(),
                                          .dprobs = d_dprobs.get(),
                                          .logits = d_logits.get(),
                                          .routing_map = d_map.get(),
                                          .aux_counts = d_aux_counts.get(),
                                          .routing = r,
                                          .losses = l,
                                          .loss_grad_scale = grad_scale});
    device_sync();
    Outputs o{d_map.download(), d_aux_map.download(), d_counts.download(), d_aux_counts.download(),
              d_probs.download(), d_dlogits.download(), d_sums.download()};
    return o;
  };
  const Outputs o = run();
  EXPECT_EQ(o.map, map_ref);
  if (c.expert_bias) EXPECT_EQ(o.aux_map, aux_map_ref);
  EXPECT_EQ(o.counts, counts_ref);
  EXPECT_EQ(o.aux_counts, aux_counts_ref);
  EXPECT_LT(relative_error(o.probs, probs_ref), kRouterRelTol);
  EXPECT_LT(relative_error(o.dlogits, dlogits_ref), kRouterRelTol);
  // Each loss within 1e-5 of itself (not of the sum it was added to), plus two float steps of the sum it lands in.
  const auto loss_tolerance = [&](double loss) {
    const double sum = initial_sum + value_scale * loss;
    return kRouterRelTol * value_scale * std::fabs(loss) + 2.0 * std::ldexp(1.0, std::ilogb(sum) - 23);
  };
  EXPECT_NEAR(o.sums[0], initial_sum + value_scale * aux_ref, loss_tolerance(aux_ref)) << "aux loss " << aux_ref;
  EXPECT_NEAR(o.sums[1], initial_sum + value_scale * z_ref, loss_tolerance(z_ref)) << "z loss " << z_ref;
  if (l.aux_coeff > 0.0f) EXPECT_GT(aux_ref, 0.0);  // the check above is not vacuous
  const Outputs again = run();
  EXPECT_TRUE(same_bits(again.map, o.map) && same_bits(again.aux_map, o.aux_map) && same_bits(again.counts, o.counts));
  EXPECT_TRUE(same_bits(again.probs, o.probs));
  EXPECT_TRUE(same_bits(again.dlogits, o.dlogits));
  EXPECT_TRUE(same_bits(again.sums, o.sums));

  // Each loss gradient alone: dprobs = 0 leaves dlogits = that loss's gradient. Inside the full dlogits above most
  // cases hold them at 1e-6 .. 6e-4 of its norm, so dropping one entirely would pass there; here it is all of it.
  DeviceBuffer<float> d_zero_dprobs(T * k);
  d_zero_dprobs.upload(std::vector<float>(T * k, 0.0f));
  d_aux_counts.upload(aux_counts_ref);
  const auto loss_gradient_alone = [&](const MoeRouterLosses& only) {
    d_dlogits.poison();
    kernels::moe_router_backward(stream, {.dlogits = d_dlogits.get(),
                                          .dprobs = d_zero_dprobs.get(),
                                          .logits = d_logits.get(),
                                          .routing_map = d_map.get(),
                                          .aux_counts = d_aux_counts.get(),
                                          .routing = r,
                                          .losses = only,
                                          .loss_grad_scale = grad_scale});
    return d_dlogits.download();
  };
  const auto nonzero = [](const std::vector<float>& v) {
    return std::any_of(v.begin(), v.end(), [](float x) { return x != 0.0f; });
  };
  // With k == E every expert takes every token: uniform counts make the aux gradient 0 up to rounding, and the two
  // sides' rounding noise would be compared with itself.
  if (l.aux_coeff > 0.0f && k < E) {
    const MoeRouterLosses aux_only{.aux_coeff = l.aux_coeff, .aux_group_tokens = l.aux_group_tokens};
    std::vector<float> want(T * E, 0.0f);
    ref::moe_aux_loss_backward<float>(want.data(), logits.data(), aux_counts_ref.data(), r, aux_only, grad_scale);
    EXPECT_LT(relative_error(loss_gradient_alone(aux_only), want), kAuxGradRelTol) << "aux-loss gradient alone";
    EXPECT_TRUE(nonzero(want)) << "the aux-loss gradient check is vacuous";
  }
  if (l.z_coeff > 0.0f) {
    const MoeRouterLosses z_only{.z_coeff = l.z_coeff};
    std::vector<float> want(T * E, 0.0f);
    ref::moe_z_loss_backward<float>(want.data(), logits.data(), r, z_only, grad_scale);
    EXPECT_LT(relative_error(loss_gradient_alone(z_only), want), kRouterRelTol) << "z-loss gradient alone";
    EXPECT_TRUE(nonzero(want)) << "the z-loss gradient check is vacuous";
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, MoeRouterGpu, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return std::string(info.param.name); });

// Logits on a grid of 1/8 (ties in every row), from [lo, hi] eighths; every 4th row with some NaN and -inf, one
// row all NaN, one with fewer finite logits than k; with `saturated`, a third of each row at 18 .. 26 (sigmoid
// exactly 1.0f on both sides: exp(-18) is below half a float step of 1).
std::vector<float> tied_logits(int64_t T, int64_t E, int64_t k, int lo, int hi, bool saturated, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::uniform_int_distribution<int> eighths(lo, hi), high(18 * 8, 26 * 8), expert(0, static_cast<int>(E) - 1);
  std::vector<float> x(T * E);
  for (int64_t i = 0; i < T * E; ++i) {
    x[i] = static_cast<float>(saturated && i % 3 == 0 ? high(gen) : eighths(gen)) / 8.0f;
  }
  for (int64_t t = 0; t < T; t += 4) {
    for (int i = 0; i < 3; ++i) x[t * E + expert(gen)] = NAN;
    x[t * E + expert(gen)] = -INFINITY;
  }
  std::fill(x.begin() + 1 * E, x.begin() + 2 * E, NAN);
  std::fill(x.begin() + 5 * E, x.begin() + 6 * E - (k - 1), NAN);  // k - 1 finite logits, at the end
  return x;
}

struct TieCase {
  const char* name;
  MoeRouting routing;
  bool zero_bias;  // sigmoid: select on sigmoid(logit) + 0, where saturated logits tie at 1.0
  int lo, hi;      // logits in eighths
  bool saturated;
};

// The routing maps of the GPU and the twin, exactly: ties go to the lower expert (lanes own experts l + 32 i, so
// the warp's merge must honour that too), NaN sorts below every number (and ties with -inf).
TEST(MoeRouterGpuMisc, TiesNanAndSaturatedSigmoidsRouteAsTheTwin) {
  const TieCase cases[] = {
      {"softmax_E128_k8", {.T = 67, .E = 128, .k = 8}, false, -32, 32, false},
      {"pre_softmax_E40_k3", {.T = 41, .E = 40, .k = 3, .pre_softmax = true}, false, -8, 8, false},
      {"sigmoid_E8_k2", {.T = 33, .E = 8, .k = 2, .score_function = MoeScoreFunction::sigmoid}, false, -4, 4, false},
      {"sigmoid_zero_bias_saturated_E128_k8",
       {.T = 67, .E = 128, .k = 8, .score_function = MoeScoreFunction::sigmoid},
       true,
       -32,
       32,
       true},
      {"sigmoid_zero_bias_saturated_E40_k4",
       {.T = 41, .E = 40, .k = 4, .score_function = MoeScoreFunction::sigmoid},
       true,
       -8,
       8,
       true},
  };
  cuda::Stream stream;
  for (const TieCase& c : cases) {
    const MoeRouting& r = c.routing;
    const int64_t T = r.T, E = r.E, k = r.k;
    const auto logits = tied_logits(T, E, k, c.lo, c.hi, c.saturated, 7000 + E * 3 + k);
    const std::vector<float> bias(E, 0.0f);
    std::vector<int32_t> map_ref(T * k), aux_map_ref(T * k);
    std::vector<float> probs_ref(T * k), unused(T * k);
    ref::moe_router_forward(map_ref.data(), probs_ref.data(), logits.data(), c.zero_bias ? bias.data() : nullptr, r);
    ref::moe_router_forward(aux_map_ref.data(), unused.data(), logits.data(), nullptr, r);

    // Not vacuous: some row's k-th choice ties (equal selection value) with an expert it left out.
    int64_t boundary_ties = 0;
    for (int64_t t = 0; t < T; ++t) {
      const auto value = [&](int64_t e) {
        const float v = logits[t * E + e];
        return std::isnan(v) ? -INFINITY : c.zero_bias ? 1.0f / (1.0f + std::exp(-v)) : v;
      };
      const int32_t* ids = map_ref.data() + t * k;
      for (int64_t e = 0; e < E; ++e) {
        if (std::find(ids, ids + k, e) == ids + k && value(e) == value(ids[k - 1])) {
          ++boundary_ties;
          break;
        }
      }
    }
    EXPECT_GT(boundary_ties, T / 4) << c.name;

    DeviceBuffer<float> d_logits(T * E), d_bias(E), d_probs(T * k);
    DeviceBuffer<int32_t> d_map(T * k), d_aux_map(T * k);
    d_logits.upload(logits);
    d_bias.upload(bias);
    fill_bytes(d_map, kPoisonIntByte);
    fill_bytes(d_aux_map, kPoisonIntByte);
    d_probs.poison();
    kernels::moe_router_forward(stream, {.logits = d_logits.get(),
                                         .expert_bias = c.zero_bias ? d_bias.get() : nullptr,
                                         .routing_map = d_map.get(),
                                         .probs = d_probs.get(),
                                         .aux_routing_map = c.zero_bias ? d_aux_map.get() : nullptr,
                                         .routing = r});
    device_sync();
    EXPECT_EQ(d_map.download(), map_ref) << c.name;
    if (c.zero_bias) EXPECT_EQ(d_aux_map.download(), aux_map_ref) << c.name << ": aux routing map";
    // The rows without NaN or -inf: their probs too (equal logits give equal probs, whichever tied expert won).
    const auto probs = d_probs.download();
    std::vector<float> got, want;
    for (int64_t t = 0; t < T; ++t) {
      if (!std::all_of(logits.begin() + t * E, logits.begin() + (t + 1) * E, [](float v) { return std::isfinite(v); }))
        continue;
      got.insert(got.end(), probs.begin() + t * k, probs.begin() + (t + 1) * k);
      want.insert(want.end(), probs_ref.begin() + t * k, probs_ref.begin() + (t + 1) * k);
    }
    EXPECT_LT(relative_error(got, want), kRouterRelTol) << c.name << ": probs";
  }
}

// Counts over many chunks of slots (1024 per block) with partial last chunks, every token's first slot
// on one expert (one shared-memory bin takes them all), groups that end inside a chunk, the small_moe
// shape, a handful of slots, and one expert taking every slot (the others get zero).
TEST(MoeCountExpertsGpu, ManyChunksAndOneHotBin) {
  struct Shape {
    int64_t T, E, k, group;
    bool one_expert;
  };
  for (const Shape& sh : {Shape{20001, 128, 8, 20001 / 3, false}, Shape{8192, 8, 2, 8192, false},
                          Shape{3, 5, 2, 3, false}, Shape{4099, 8, 2, 4099, true}}) {
    const int64_t T = sh.T, E = sh.E, k = sh.k, G = T / sh.group;
    std::vector<int32_t> map(T * k);
    for (int64_t s = 0; s < T * k; ++s) {
      map[s] = sh.one_expert ? static_cast<int32_t>(E - 1)
                             : (s % k == 0) ? 5 % static_cast<int32_t>(E) : static_cast<int32_t>((s * 2654435761u) % E);
    }
    std::vector<int32_t> ref_counts(G * E);
    ref::moe_count_experts(ref_counts.data(), map.data(), T, k, E, sh.group);
    DeviceBuffer<int32_t> d_map(T * k), d_counts(G * E);
    d_map.upload(map);
    cuda::Stream stream;
    for (int i = 0; i < 2; ++i) {
      fill_bytes(d_counts, kPoisonIntByte);
      kernels::moe_count_experts(
          stream, {.routing_map = d_map.get(), .counts = d_counts.get(), .T = T, .E = E, .k = k, .group_tokens = sh.group});
      device_sync();
      EXPECT_EQ(d_counts.download(), ref_counts) << "T=" << T << " E=" << E << " k=" << k;
    }
  }
}

TEST(MoeExpertBiasUpdateGpu, MatchesReferenceAndZeroesCounts) {
  for (const int64_t E : {1, 3, 8, 128}) {
    std::vector<int32_t> counts(E);
    for (int64_t e = 0; e < E; ++e) counts[e] = static_cast<int32_t>((e * 37 + 11) % 23);
    auto bias = random_normal(E, 300 + E, 0.1f);
    auto bias_ref = bias;
    auto counts_ref = counts;
    ref::moe_expert_bias_update(bias_ref.data(), counts_ref.data(), E, 1e-3f);
    DeviceBuffer<float> d_bias(E);
    DeviceBuffer<int32_t> d_counts(E);
    d_bias.upload(bias);
    d_counts.upload(counts);
    cuda::Stream stream;
    kernels::moe_expert_bias_update(stream, {.expert_bias = d_bias.get(), .step_counts = d_counts.get(), .E = E, .rate = 1e-3f});
    device_sync();
    EXPECT_TRUE(same_bits(d_bias.download(), bias_ref)) << "E=" << E;
    EXPECT_EQ(d_counts.download(), std::vector<int32_t>(E, 0));
  }
}

}  // namespace
