// Recompute in validation: Megatron's recompute keys and asserts (full needs a method and a layer count,
// selective takes none), the modules each layer kind offers, and rule 13 (graphed recompute with dropout).
#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

#include "config/config.h"
#include "config/validate.h"
#include "validation_report_text.h"

namespace sg::config {
namespace {

using test::check_recipe;
using test::describe;
using test::names_key;

TEST(Validate, Rule13GraphedRecomputeWithDropoutIsANote) {
  for (const std::vector<std::string>& o :
       {std::vector<std::string>{"model.cuda_graph_scope=attn", "model.recompute_modules=core_attn",
                                 "model.attention_dropout=0.1"},
        std::vector<std::string>{"model.cuda_graph_scope=mlp", "model.recompute_modules=mlp",
                                 "model.hidden_dropout=0.1"}}) {
    std::vector<std::string> overrides = {"model.cuda_graph_impl=transformer_engine",
                                          "model.recompute_granularity=selective"};
    overrides.insert(overrides.end(), o.begin(), o.end());
    const config::ValidationReport r = check_recipe("llama/tiny", overrides);
    EXPECT_TRUE(r.ok()) << describe(r);
    const auto note = std::find_if(r.notes.begin(), r.notes.end(), [](const config::Note& n) { return n.rule == 13; });
    ASSERT_NE(note, r.notes.end()) << describe(r);
    EXPECT_NE(note->message.find("draws the forward's masks"), std::string::npos) << note->message;
  }
  // Without dropout there is nothing to note.
  const config::ValidationReport quiet =
      check_recipe("llama/tiny", {"model.cuda_graph_impl=transformer_engine", "model.cuda_graph_scope=attn",
                                  "model.recompute_granularity=selective", "model.recompute_modules=core_attn"});
  EXPECT_TRUE(std::none_of(quiet.notes.begin(), quiet.notes.end(), [](const config::Note& n) { return n.rule == 13; }))
      << describe(quiet);
}

TEST(Validate, RecomputeKeysFollowMegatronAndTheLayerKinds) {
  // Accepted and no longer noted as unimplemented.
  for (const std::vector<std::string>& ok :
       {std::vector<std::string>{"model.recompute_granularity=selective",
                                 "model.recompute_modules=[core_attn, mlp, layernorm]"},
        std::vector<std::string>{"model.recompute_granularity=full", "model.recompute_method=uniform",
                                 "model.recompute_num_layers=2"},
        std::vector<std::string>{"model.recompute_granularity=full", "model.recompute_method=block",
                                 "model.recompute_num_layers=1", "model.cuda_graph_impl=local"}}) {
    const config::ValidationReport r = check_recipe("llama/tiny", ok);
    EXPECT_TRUE(r.ok()) << describe(r);
    EXPECT_TRUE(config::unimplemented_features(r.config).empty());
  }
  // Megatron's asserts: full needs a method and a layer count; selective takes no layer count.
  const config::ValidationReport no_method =
      check_recipe("llama/tiny", {"model.recompute_granularity=full", "model.recompute_num_layers=1"});
  ASSERT_FALSE(no_method.ok());
  EXPECT_TRUE(names_key(no_method.violations[0], "model.recompute_method")) << describe(no_method);
  const config::ValidationReport no_count =
      check_recipe("llama/tiny", {"model.recompute_granularity=full", "model.recompute_method=block"});
  ASSERT_FALSE(no_count.ok());
  EXPECT_TRUE(names_key(no_count.violations[0], "model.recompute_num_layers")) << describe(no_count);
  const config::ValidationReport selective_count =
      check_recipe("llama/tiny", {"model.recompute_granularity=selective", "model.recompute_num_layers=1"});
  ASSERT_FALSE(selective_count.ok());
  EXPECT_TRUE(names_key(selective_count.violations[0], "model.recompute_num_layers")) << describe(selective_count);
  const config::ValidationReport too_many = check_recipe(
      "llama/tiny",
      {"model.recompute_granularity=full", "model.recompute_method=block", "model.recompute_num_layers=5"});
  EXPECT_FALSE(too_many.ok()) << describe(too_many);  // llama/tiny has 4 layers
  const config::ValidationReport bad_method =
      check_recipe("llama/tiny",
                   {"model.recompute_granularity=full", "model.recompute_method=blok", "model.recompute_num_layers=1"});
  ASSERT_FALSE(bad_method.ok());
  EXPECT_NE(bad_method.violations[0].fix.find("did you mean 'block'"), std::string::npos) << describe(bad_method);
  // Modules of a layer kind this stack lacks (llama/tiny: attention and dense MLP): an error naming the kind.
  const struct {
    const char* module;
    const char* names;
  } missing[] = {{"moe_act", "no MoE layers (E in the pattern"},
                 {"moe", "no MoE layers"},
                 {"shared_experts", "no MoE layers"},
                 {"mamba", "no Mamba layers (M in the pattern"},
                 {"mla_up_proj", "no layer kind"}};
  for (const auto& m : missing) {
    SCOPED_TRACE(m.module);
    const config::ValidationReport r = check_recipe(
        "llama/tiny", {"model.recompute_granularity=selective", std::string("model.recompute_modules=") + m.module});
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.violations[0].rule, 16);
    EXPECT_NE(r.violations[0].message.find(m.names), std::string::npos) << describe(r);
    EXPECT_NE(r.violations[0].fix.find(m.module), std::string::npos) << describe(r);
  }
}

TEST(Validate, MoeAndMambaRecomputeModulesAreAcceptedWhereTheStackHasTheKind) {
  const struct {
    const char* recipe;
    std::vector<std::string> overrides;
  } ok[] = {
      {"moe/tiny_moe", {"model.recompute_granularity=selective", "model.recompute_modules=[core_attn, moe_act]"}},
      {"moe/tiny_moe", {"model.recompute_granularity=selective", "model.recompute_modules=[moe, layernorm]"}},
      {"moe/tiny_moe",
       {"model.recompute_granularity=selective", "model.recompute_modules=[moe_act, shared_experts]",
        "model.moe_shared_expert_intermediate_size=256"}},
      {"moe/tiny_moe",
       {"model.recompute_granularity=full", "model.recompute_method=uniform", "model.recompute_num_layers=1",
        "model.cuda_graph_impl=local"}},
      {"moe/tiny_moe",
       {"model.cuda_graph_impl=transformer_engine", "model.cuda_graph_scope=attn,moe",
        "model.recompute_granularity=selective", "model.recompute_modules=moe"}},
      {"hybrid/tiny_hybrid",
       {"model.recompute_granularity=selective", "model.recompute_modules=[mamba, core_attn, mlp]"}},
      {"hybrid/tiny_hybrid",
       {"model.recompute_granularity=full", "model.recompute_method=block", "model.recompute_num_layers=3"}},
      // The every-kind stack of tests/train/graph_modes_recompute_kinds_gpu_test.cpp.
      {"hybrid/tiny_hybrid",
       {"model.cuda_graph_impl=transformer_engine", "model.recompute_granularity=selective",
        "model.recompute_modules=[mamba, moe, mlp]", "model.cuda_graph_scope=attn,mamba,moe",
        "model.hybrid_override_pattern=M*EM*-ME", "model.num_moe_experts=8", "model.moe_router_topk=2",
        "model.moe_ffn_hidden_size=256", "model.moe_aux_loss_coeff=1e-2", "model.moe_token_dispatcher_type=alltoall",
        "model.activation_func=silu", "model.gated_linear_unit=true"}},  // SwiGLU MLP and experts
  };
  for (const auto& c : ok) {
    SCOPED_TRACE(std::string(c.recipe) + " " + c.overrides[1]);
    const config::ValidationReport r = check_recipe(c.recipe, c.overrides);
    EXPECT_TRUE(r.ok()) << describe(r);
  }
  // shared_experts needs a shared expert; mamba needs Mamba layers; moe_act needs MoE layers.
  const config::ValidationReport no_shared =
      check_recipe("moe/tiny_moe", {"model.recompute_granularity=selective", "model.recompute_modules=shared_experts"});
  ASSERT_FALSE(no_shared.ok());
  EXPECT_NE(no_shared.violations[0].message.find("no shared expert"), std::string::npos) << describe(no_shared);
  EXPECT_NE(no_shared.violations[0].fix.find("moe_shared_expert_intermediate_size"), std::string::npos);
  const config::ValidationReport no_mamba =
      check_recipe("moe/tiny_moe", {"model.recompute_granularity=selective", "model.recompute_modules=mamba"});
  ASSERT_FALSE(no_mamba.ok());
  EXPECT_NE(no_mamba.violations[0].message.find("no Mamba layers"), std::string::npos) << describe(no_mamba);
  const config::ValidationReport no_moe =
      check_recipe("hybrid/tiny_hybrid", {"model.recompute_granularity=selective", "model.recompute_modules=moe_act"});
  ASSERT_FALSE(no_moe.ok());
  EXPECT_NE(no_moe.violations[0].message.find("no MoE layers"), std::string::npos) << describe(no_moe);
}

}  // namespace
}  // namespace sg::config
