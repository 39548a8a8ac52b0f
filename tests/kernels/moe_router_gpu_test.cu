// GPU MoE router (forward, counts, aux / seq-aux / z-loss, backward, expert-bias update) against
// reference/moe_router on fresh random logits.
// Tolerances: integer outputs (routing maps, counts) exact; fp32 probs, losses and dlogits within a
// relative error of 1e-5 (same fp32 inputs, fp32 math in another summation order; the logits of a row
// are well separated, so rounding never changes a top-k); expert bias exact. Outputs are poisoned before
// each run, and every launch runs twice with bitwise identical results.
#include <gtest/gtest.h>

#include <cmath>
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
};

class MoeRouterGpu : public ::testing::TestWithParam<RouterCase> {};

TEST_P(MoeRouterGpu, MatchesReference) {
  const RouterCase& c = GetParam();
  const MoeRouting& r = c.routing;
  const MoeRouterLosses& l = c.losses;
  const int64_t T = r.T, E = r.E, k = r.k, G = l.groups(T);
  const uint64_t seed = 1000 + T * 7 + E * 3 + k;
  const auto logits = separated_logits(T, E, seed, c.logits);
  // Whole-number biases: sigmoid scores lie in (0.018, 0.982) for these logits, so the biased
  // selection values stay well separated (a continuous bias could make two of them meet within the
  // ulps by which the GPU's expf and the host's may differ).
  std::vector<float> bias;
  if (c.expert_bias) {
    bias.resize(E);
    for (int64_t e = 0; e < E; ++e) bias[e] = static_cast<float>((e * 5 + seed) % 3);
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
}

INSTANTIATE_TEST_SUITE_P(Cases, MoeRouterGpu, ::testing::ValuesIn(kCases),
                         [](const auto& info) { return std::string(info.param.name); });

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
