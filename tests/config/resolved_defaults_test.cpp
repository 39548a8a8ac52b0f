// Bridge's meaning of unset model keys (config/model_config.h's resolved_*): the values validation writes into
// the config are the ones model_spec builds the model with, from the same functions.
#include <gtest/gtest.h>

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
