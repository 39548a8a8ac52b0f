// Bridge's meaning of unset model keys (config/model_config.h's resolved_*): the values validation writes into
// the config are the ones model_spec builds the model with, from the same functions.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "config/model_config.h"
#include "config/validate.h"

namespace sg::config {
namespace {

TEST(ResolvedDefaults, ValidationWritesWhatModelSpecBuilds) {
  const Config bare =
      load_config_yaml("model:\n  hidden_size: 512\n  num_attention_heads: 8\n  num_moe_experts: 4\n", "bare");
  const ModelConfig& resolved = validate(bare).config.model;
  const model::ModelSpec spec = model_spec(bare);
  EXPECT_EQ(resolved_ffn_hidden_size(bare.model), 2048);
  EXPECT_EQ(resolved.ffn_hidden_size, spec.ffn_hidden_size);
  EXPECT_EQ(resolved_num_query_groups(bare.model), 8);
  EXPECT_EQ(resolved.num_query_groups, spec.num_query_groups);
  EXPECT_EQ(resolved_moe_ffn_hidden_size(bare.model), 2048);
  EXPECT_EQ(resolved.moe_ffn_hidden_size, spec.moe_ffn_hidden_size);
  // Validated or not, the model is the same.
  EXPECT_EQ(model_spec(validate(bare).config).ffn_hidden_size, spec.ffn_hidden_size);
  EXPECT_EQ(model_spec(validate(bare).config).moe_ffn_hidden_size, spec.moe_ffn_hidden_size);

  ModelConfig dense = bare.model;
  dense.num_moe_experts.reset();
  EXPECT_EQ(resolved_moe_ffn_hidden_size(dense), 0);  // no MoE layers: no expert width
}

// A run's config.yaml writes the keys validation derived as null (their value in a comment): run again with an
// override of what they derive from, they follow it, as they would from the recipe; run as it is, it is the same run.
// The global batch stays a value: it depends on the ranks, and a resume at another world size keeps it.
TEST(ResolvedDefaults, ARunsConfigDerivesItsDerivedKeysAgainUnderOverrides) {
  // llama/tiny with its widths and batch left to Bridge's defaults.
  const std::vector<std::string> unset = {"model.ffn_hidden_size=null", "model.num_query_groups=null",
                                          "train.global_batch_size=null"};
  Config recipe = load_config("llama/tiny", unset);
  apply_override(recipe, "train.train_iters=6");
  const Config resolved = validate(recipe).config;
  EXPECT_EQ(resolved.scheduler.lr_decay_iters, 6);
  const std::string run_yaml = emit_yaml(resolved, "", EmitDerived::as_null);
  EXPECT_NE(run_yaml.find("  lr_decay_iters: null  # = 6 (decay steps; null = train_iters)\n"), std::string::npos)
      << run_yaml;
  EXPECT_NE(run_yaml.find("  ffn_hidden_size: null  # = "), std::string::npos) << run_yaml;
  EXPECT_NE(emit_yaml(resolved).find("  lr_decay_iters: 6\n"), std::string::npos) << "config show keeps values";
  // As it is: the same resolved config.
  EXPECT_EQ(emit_yaml(validate(load_config_yaml(run_yaml, "run")).config), emit_yaml(resolved));
  // With overrides: what was derived follows them, as from the recipe.
  EXPECT_NE(run_yaml.find("  global_batch_size: " + std::to_string(*resolved.train.global_batch_size) + "\n"),
            std::string::npos)
      << run_yaml;
  const std::vector<std::string> overrides = {"train.train_iters=100", "model.hidden_size=128",
                                              "model.num_attention_heads=8"};
  Config rerun = load_config_yaml(run_yaml, "run");
  apply_overrides(rerun, overrides);
  Config from_recipe = load_config("llama/tiny", unset);
  apply_overrides(from_recipe, overrides);
  const Config a = validate(rerun).config, b = validate(from_recipe).config;
  EXPECT_EQ(a.scheduler.lr_decay_iters, 100);
  EXPECT_EQ(a.model.ffn_hidden_size, b.model.ffn_hidden_size);
  EXPECT_EQ(a.model.num_query_groups, b.model.num_query_groups);
  EXPECT_EQ(a.model.ffn_hidden_size, 512);
  EXPECT_EQ(a.model.num_query_groups, 8);
}

TEST(ResolvedDefaults, PositionEmbeddingIsRopeUnlessHybrid) {
  ModelConfig m;
  EXPECT_EQ(resolved_position_embedding_type(m), "rope");
  m.hybrid_override_pattern = "";
  EXPECT_EQ(resolved_position_embedding_type(m), "rope");  // an empty pattern is the GPT layout
  m.hybrid_override_pattern = "M*-";
  EXPECT_EQ(resolved_position_embedding_type(m), "none");
  m.position_embedding_type = "rope";
  EXPECT_EQ(resolved_position_embedding_type(m), "rope");
}

TEST(ResolvedDefaults, RecomputeGranularityReadsTheModelLayersNames) {
  ModelConfig m;
  EXPECT_EQ(recompute_granularity(m), model::RecomputeGranularity::none);
  m.recompute_granularity = "selective";
  EXPECT_EQ(recompute_granularity(m), model::RecomputeGranularity::selective);
  m.recompute_granularity = "full";
  EXPECT_EQ(recompute_granularity(m), model::RecomputeGranularity::full);
  m.recompute_granularity = "ful";
  EXPECT_FALSE(recompute_granularity(m).has_value());  // validation reports it
}

}  // namespace
}  // namespace sg::config
