// Which regions get graphs for each impl, scope list and model pattern (pure CPU).
#include "graph/scope_plan.h"

#include <gtest/gtest.h>

#include <functional>

#include "core/error.h"
#include "core/strings.h"
#include "test_util.h"

namespace sg::graph {
namespace {

using test::thrown_message;

std::vector<LayerRegions> dense(int n) {
  std::vector<LayerRegions> layers;
  for (int i = 0; i < n; ++i) layers.push_back({i, {Module::attn, Module::mlp}});
  return layers;
}

// Megatron hybrid pattern "M*-E": mamba, attention, dense MLP, MoE (router, preprocess, experts).
std::vector<LayerRegions> hybrid() {
  return {{0, {Module::mamba}},
          {1, {Module::attn}},
          {2, {Module::mlp}},
          {3, {Module::moe_router, Module::moe_preprocess, Module::moe}}};
}

TEST(ScopePlan, NoneMakesNoGraphs) {
  const ScopePlan p = plan_graph_scopes(GraphImpl::none, {GraphScope::attn}, dense(4), 1);
  EXPECT_EQ(p.num_graphs(), 0);
  EXPECT_FALSE(p.full_iteration);
  EXPECT_TRUE(p.graphed_regions.empty());
  EXPECT_EQ(p.graphable_layers, 0);
  EXPECT_TRUE(p.scopes.empty());
}

TEST(ScopePlan, LocalIsOneFullIterationGraph) {
  for (const auto& scopes : {std::vector<GraphScope>{}, std::vector<GraphScope>{GraphScope::full_iteration}}) {
    const ScopePlan p = plan_graph_scopes(GraphImpl::local, scopes, dense(4), 1);
    EXPECT_TRUE(p.full_iteration);
    EXPECT_EQ(p.num_graphs(), 1);
    EXPECT_TRUE(p.graphed_regions.empty());
    EXPECT_EQ(p.scopes, std::vector<GraphScope>{GraphScope::full_iteration});
    EXPECT_EQ(p.graphable_layers, 4);  // every layer is inside the one graph
    EXPECT_NE(p.describe().find("1 graph of the whole step"), std::string::npos) << p.describe();
  }
  const std::string msg = thrown_message([] { plan_graph_scopes(GraphImpl::local, {GraphScope::attn}, dense(2), 1); });
  EXPECT_NE(msg.find("cuda_graph_impl local"), std::string::npos) << msg;
  EXPECT_NE(msg.find("[attn]"), std::string::npos) << msg;
  EXPECT_NE(msg.find("transformer_engine"), std::string::npos) << msg;  // the fix
}

TEST(ScopePlan, AttnOnlyGraphsAttentionForwardAndBackward) {
  const ScopePlan p = plan_graph_scopes(GraphImpl::transformer_engine, {GraphScope::attn}, dense(3), 1);
  ASSERT_EQ(p.num_graphs(), 6);
  EXPECT_EQ(p.graphable_layers, 3);
  // Run order: forward ascending, then backward descending.
  const std::vector<RegionKey> expected = {
      {0, Module::attn, Phase::forward},  {1, Module::attn, Phase::forward},  {2, Module::attn, Phase::forward},
      {2, Module::attn, Phase::backward}, {1, Module::attn, Phase::backward}, {0, Module::attn, Phase::backward}};
  EXPECT_EQ(p.graphed_regions, expected);
  EXPECT_TRUE(p.graphs_region({1, Module::attn, Phase::backward}));
  EXPECT_FALSE(p.graphs_region({1, Module::mlp, Phase::forward}));
  EXPECT_NE(p.describe().find("6 region graphs, 3 graphable layers of 3"), std::string::npos) << p.describe();
}

TEST(ScopePlan, AttnAndMlpGraphWholeDenseLayers) {
  const ScopePlan p =
      plan_graph_scopes(GraphImpl::transformer_engine, {GraphScope::attn, GraphScope::mlp}, dense(4), 1);
  EXPECT_EQ(p.num_graphs(), 16);
  EXPECT_EQ(p.graphable_layers, 4);
  // Backward of a layer runs mlp before attn.
  EXPECT_EQ(p.graphed_regions[8], (RegionKey{3, Module::mlp, Phase::backward}));
  EXPECT_EQ(p.graphed_regions[9], (RegionKey{3, Module::attn, Phase::backward}));
}

// With more than one microbatch the first microbatch's backward regions (they overwrite the gradients
// the later ones add to) are graphs of their own; the plan lists the plain key, which graphs both.
TEST(ScopePlan, FirstMicrobatchBackwardIsARegionOfItsOwn) {
  const auto plan = [](int64_t microbatches) {
    return plan_graph_scopes(GraphImpl::transformer_engine, {GraphScope::attn, GraphScope::mlp}, dense(4),
                             microbatches);
  };
  EXPECT_EQ(plan(1).num_graphs(), 16);
  EXPECT_EQ(plan(2).num_graphs(), 16 + 8);
  EXPECT_EQ(plan(8).num_graphs(), 16 + 8);
  EXPECT_EQ(plan(2).graphed_regions, plan(1).graphed_regions);  // the same regions, the backward ones twice
  const ScopePlan p = plan(2);
  const RegionKey first{3, Module::mlp, Phase::backward, /*first_microbatch=*/true};
  EXPECT_NE(first, (RegionKey{3, Module::mlp, Phase::backward}));
  EXPECT_EQ(first.plain(), (RegionKey{3, Module::mlp, Phase::backward}));
  EXPECT_TRUE(p.graphs_region(first.plain()));
  EXPECT_EQ(region_name(first), "layer 3 mlp backward first");
  EXPECT_EQ(region_name(first.plain()), "layer 3 mlp backward");
  const ScopePlan local = plan_graph_scopes(GraphImpl::local, {GraphScope::full_iteration}, dense(4), 4);
  EXPECT_EQ(local.num_graphs(), 1);
  EXPECT_NE(local.describe().find("1 graph of the whole step"), std::string::npos) << local.describe();
  EXPECT_EQ(plan_graph_scopes(GraphImpl::none, {}, dense(4), 4).num_graphs(), 0);
  EXPECT_NE(thrown_message([&] { plan(0); }).find("0 microbatches"), std::string::npos);
}

// The description says the number of graphs the run creates, with the step's microbatches: it once
// counted one microbatch ("16 region graphs") while the trainer's start report, on the same line, said
// 24. [attn, mlp] over 4 dense layers with 2 microbatches graphs what tests/train/graph_modes_gpu_test.cpp's
// tiny recipe does (its stack: 4 attention and 4 MLP layers; global batch 8 of micro batch 4), where 24 region
// graphs are live (12 for attn or mlp alone).
TEST(ScopePlan, DescribeCountsTheGraphsOfEveryMicrobatchVariant) {
  const ScopePlan two =
      plan_graph_scopes(GraphImpl::transformer_engine, {GraphScope::attn, GraphScope::mlp}, dense(4), 2);
  EXPECT_EQ(two.num_graphs(), 24);  // GraphModesGpu.EveryModeIsBitwiseEqualToEager: attn,mlp -> 24
  EXPECT_NE(two.describe().find(strprintf("%d region graphs", two.num_graphs())), std::string::npos) << two.describe();
  EXPECT_EQ(two.describe(),
            "transformer_engine [attn, mlp]: 24 region graphs (16 regions, the 8 backward ones twice: 2 "
            "microbatches), 4 graphable layers of 4");
  for (GraphScope scope : {GraphScope::attn, GraphScope::mlp}) {
    const ScopePlan one_module = plan_graph_scopes(GraphImpl::transformer_engine, {scope}, dense(4), 2);
    EXPECT_EQ(one_module.num_graphs(), 12);  // the GPU test's attn and mlp modes
    EXPECT_NE(one_module.describe().find("12 region graphs"), std::string::npos) << one_module.describe();
  }
  // One microbatch: no first-microbatch variants, and the description says nothing of them.
  const ScopePlan one =
      plan_graph_scopes(GraphImpl::transformer_engine, {GraphScope::attn, GraphScope::mlp}, dense(4), 1);
  EXPECT_EQ(one.describe(), "transformer_engine [attn, mlp]: 16 region graphs, 4 graphable layers of 4");
}

TEST(ScopePlan, EmptyScopeWithTransformerEngineGraphsEveryMarkedModule) {
  const ScopePlan p = plan_graph_scopes(GraphImpl::transformer_engine, {}, hybrid(), 1);
  EXPECT_EQ(p.num_graphs(), 2 * 6);  // mamba, attn, mlp, router, preprocess, moe
  EXPECT_EQ(p.graphable_layers, 4);
}

TEST(ScopePlan, HybridPatternPicksOnlyMatchingLayers) {
  const auto layers = hybrid();
  {
    const ScopePlan p = plan_graph_scopes(GraphImpl::transformer_engine, {GraphScope::mamba}, layers, 1);
    EXPECT_EQ(p.num_graphs(), 2);
    EXPECT_EQ(p.graphable_layers, 1);
    EXPECT_TRUE(p.graphs_region({0, Module::mamba, Phase::forward}));
  }
  {
    // moe covers the whole MoE layer: router, preprocess and experts.
    const ScopePlan p = plan_graph_scopes(GraphImpl::transformer_engine, {GraphScope::moe}, layers, 1);
    EXPECT_EQ(p.num_graphs(), 6);
    EXPECT_EQ(p.graphable_layers, 1);
    EXPECT_TRUE(p.graphs_region({3, Module::moe_router, Phase::backward}));
  }
  {
    const ScopePlan p =
        plan_graph_scopes(GraphImpl::transformer_engine,
                          {GraphScope::attn, GraphScope::moe_router, GraphScope::moe_preprocess}, layers, 1);
    EXPECT_EQ(p.num_graphs(), 6);  // attn (layer 1) + router + preprocess (layer 3), fwd and bwd
    EXPECT_EQ(p.graphable_layers, 2);
    EXPECT_FALSE(p.graphs_region({3, Module::moe, Phase::forward}));
    EXPECT_TRUE(p.graphs_region({3, Module::moe_preprocess, Phase::forward}));
  }
  {
    // mlp does not graph MoE layers, and a scope the model lacks graphs nothing.
    const ScopePlan p = plan_graph_scopes(GraphImpl::transformer_engine, {GraphScope::mlp}, dense(0), 1);
    EXPECT_EQ(p.num_graphs(), 0);
    const ScopePlan q = plan_graph_scopes(GraphImpl::transformer_engine, {GraphScope::mamba}, dense(2), 1);
    EXPECT_EQ(q.num_graphs(), 0);
    EXPECT_EQ(q.graphable_layers, 0);
  }
}

TEST(ScopePlan, DuplicateScopesAreNormalised) {
  const ScopePlan p =
      plan_graph_scopes(GraphImpl::transformer_engine, {GraphScope::attn, GraphScope::attn}, dense(2), 1);
  EXPECT_EQ(p.scopes, std::vector<GraphScope>{GraphScope::attn});
  EXPECT_EQ(p.num_graphs(), 4);
}

TEST(ScopePlan, RejectsInvalidCombinations) {
  const auto layers = hybrid();
  std::string msg = thrown_message(
      [&] { plan_graph_scopes(GraphImpl::transformer_engine, {GraphScope::full_iteration}, layers, 1); });
  EXPECT_NE(msg.find("full_iteration is only valid with cuda_graph_impl local"), std::string::npos) << msg;
  msg = thrown_message([&] {
    plan_graph_scopes(GraphImpl::transformer_engine, {GraphScope::moe, GraphScope::moe_router}, layers, 1);
  });
  EXPECT_NE(msg.find("moe and moe_router are mutually exclusive"), std::string::npos) << msg;
  msg = thrown_message(
      [&] { plan_graph_scopes(GraphImpl::transformer_engine, {GraphScope::moe_preprocess}, layers, 1); });
  EXPECT_NE(msg.find("moe_preprocess requires moe_router"), std::string::npos) << msg;
  msg = thrown_message([] {
    plan_graph_scopes(GraphImpl::transformer_engine, {GraphScope::attn}, {{0, {Module::attn}}, {0, {Module::mlp}}}, 1);
  });
  EXPECT_NE(msg.find("layer 0 is listed twice"), std::string::npos) << msg;
}

TEST(ScopePlan, RulesAreReportedOnceEachWithTheirFix) {
  using S = GraphScope;
  EXPECT_TRUE(check_scope_rules(GraphImpl::none, {S::full_iteration, S::moe, S::moe_router}).empty());
  EXPECT_TRUE(check_scope_rules(GraphImpl::local, {S::full_iteration}).empty());
  EXPECT_TRUE(check_scope_rules(GraphImpl::transformer_engine, {S::attn, S::moe_router, S::moe_preprocess}).empty());
  const auto rules = [](GraphImpl impl, const std::vector<GraphScope>& scopes) {
    std::vector<ScopeRule> out;
    for (const ScopeProblem& p : check_scope_rules(impl, scopes)) {
      EXPECT_FALSE(p.message.empty());
      EXPECT_FALSE(p.fix.empty());
      out.push_back(p.rule);
    }
    return out;
  };
  EXPECT_EQ(rules(GraphImpl::local, {S::full_iteration, S::attn}), std::vector<ScopeRule>{ScopeRule::full_iteration_not_alone});
  EXPECT_EQ(rules(GraphImpl::local, {S::attn, S::mlp}), std::vector<ScopeRule>{ScopeRule::local_with_module_scopes});
  EXPECT_NE(check_scope_rules(GraphImpl::local, {S::attn, S::mlp})[0].fix.find("per-module graphs of attn,mlp"),
            std::string::npos);
  EXPECT_EQ(rules(GraphImpl::transformer_engine, {S::full_iteration, S::moe, S::moe_router, S::moe_preprocess}),
            (std::vector<ScopeRule>{ScopeRule::full_iteration_without_local, ScopeRule::moe_with_moe_router}));
  EXPECT_EQ(rules(GraphImpl::transformer_engine, {S::moe_preprocess}),
            std::vector<ScopeRule>{ScopeRule::moe_preprocess_without_router});
  // Names: one list, used by the parser and by config validation.
  EXPECT_EQ(graph_impl_names(), (std::vector<std::string>{"none", "local", "transformer_engine"}));
  EXPECT_EQ(graph_scope_names().size(), 7u);
  EXPECT_FALSE(check_graph_scope_name("mlp").has_value());
  const auto bad = check_graph_scope_name("moe_routr");
  ASSERT_TRUE(bad.has_value());
  EXPECT_EQ(bad->rule, ScopeRule::unknown_scope);
  EXPECT_NE(bad->fix.find("did you mean 'moe_router'"), std::string::npos) << bad->fix;
  EXPECT_EQ(check_graph_impl_name("TE")->rule, ScopeRule::unknown_impl);
}

TEST(ScopePlan, ParsesConfigSpellings) {
  EXPECT_EQ(parse_graph_impl("transformer_engine"), GraphImpl::transformer_engine);
  EXPECT_EQ(parse_graph_impl("local"), GraphImpl::local);
  EXPECT_EQ(parse_graph_scopes({"attn", " mlp", "moe_router "}),
            (std::vector<GraphScope>{GraphScope::attn, GraphScope::mlp, GraphScope::moe_router}));
  std::string msg = thrown_message([] { parse_graph_impl("transformer-engine"); });
  EXPECT_NE(msg.find("did you mean 'transformer_engine'"), std::string::npos) << msg;
  msg = thrown_message([] { parse_graph_scope("atn"); });
  EXPECT_NE(msg.find("did you mean 'attn'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("model.cuda_graph_scope"), std::string::npos) << msg;
  for (GraphScope s : {GraphScope::full_iteration, GraphScope::attn, GraphScope::mlp, GraphScope::moe,
                       GraphScope::moe_router, GraphScope::moe_preprocess, GraphScope::mamba}) {
    EXPECT_EQ(parse_graph_scope(graph_scope_name(s)), s);
  }
}

// One name table: every impl and scope parses back from its name, no two share one, and a module scope is
// spelled as the module it is named after (region.h's module_name).
TEST(ScopePlan, EveryNameRoundTrips) {
  const std::vector<std::string> impls = graph_impl_names();
  EXPECT_EQ(impls, (std::vector<std::string>{"none", "local", "transformer_engine"}));
  for (GraphImpl i : {GraphImpl::none, GraphImpl::local, GraphImpl::transformer_engine}) {
    EXPECT_EQ(find_graph_impl(graph_impl_name(i)), i) << graph_impl_name(i);
  }
  const std::vector<std::string> scopes = graph_scope_names();
  EXPECT_EQ(scopes, (std::vector<std::string>{"full_iteration", "attn", "mlp", "moe", "moe_router",
                                              "moe_preprocess", "mamba"}));
  for (const std::string& name : scopes) {
    const std::optional<GraphScope> scope = find_graph_scope(name);
    ASSERT_TRUE(scope.has_value()) << name;
    EXPECT_EQ(graph_scope_name(*scope), name);
  }
  const std::pair<GraphScope, Module> namesakes[] = {
      {GraphScope::attn, Module::attn},
      {GraphScope::mlp, Module::mlp},
      {GraphScope::moe, Module::moe},
      {GraphScope::moe_router, Module::moe_router},
      {GraphScope::moe_preprocess, Module::moe_preprocess},
      {GraphScope::mamba, Module::mamba},
  };
  for (const auto& [scope, module] : namesakes) EXPECT_STREQ(graph_scope_name(scope), module_name(module));
  EXPECT_FALSE(find_graph_scope("mlps").has_value());
  EXPECT_FALSE(find_graph_impl("Local").has_value());
}

}  // namespace
}  // namespace sg::graph
