// The model, batch and layer views of a config (config/model_config.h): the specs a recipe gives, the layer
// pattern, and Megatron's two names of the hybrid pattern with their overrides and spellings.
#include "config/model_config.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "config/config.h"
#include "config/validate.h"
#include "config_test_util.h"
#include "core/strings.h"
#include "model/layer_registry.h"
#include "model/stack.h"
#include "test_util.h"

namespace sg::config {
namespace {

TEST(ModelConfig, SpecsAndLayerPattern) {
  using model::LayerKind;
  const config::Config tiny = config::validate(config::load_config("llama/tiny")).config;
  const model::ModelSpec spec = config::model_spec(tiny);
  EXPECT_EQ(spec.vocab_size, 8192);
  EXPECT_EQ(spec.num_layers, 4);
  EXPECT_EQ(spec.hidden_size, 256);
  EXPECT_EQ(spec.ffn_hidden_size, 704);
  EXPECT_EQ(spec.num_attention_heads, 4);
  EXPECT_EQ(spec.num_query_groups, 4);
  EXPECT_EQ(spec.head_dim(), 64);
  EXPECT_EQ(spec.num_moe_experts, 0);
  EXPECT_EQ(config::batch_spec(tiny).micro_batch_size, 4);
  EXPECT_EQ(config::batch_spec(tiny).num_microbatches, 1);
  EXPECT_EQ(config::batch_spec(config::load_config("llama/tiny", {"train.global_batch_size=12"})).num_microbatches, 3);

  EXPECT_EQ(config::layer_pattern(tiny),
            (std::vector<LayerKind>{LayerKind::attention, LayerKind::mlp, LayerKind::attention, LayerKind::mlp,
                                    LayerKind::attention, LayerKind::mlp, LayerKind::attention, LayerKind::mlp}));
  const config::Config moe = config::load_config("moe/tiny_moe");
  const auto moe_layers = config::layer_pattern(moe);
  ASSERT_EQ(moe_layers.size(), 8u);
  for (size_t i = 0; i < moe_layers.size(); ++i) {
    EXPECT_EQ(moe_layers[i], i % 2 ? LayerKind::moe : LayerKind::attention);
  }
  EXPECT_EQ(config::model_spec(moe).num_moe_experts, 8);
  EXPECT_EQ(config::model_spec(moe).moe_ffn_hidden_size, 256);

  const config::Config hybrid = config::load_config("llama/tiny", {"model.hybrid_override_pattern=M*-E"});
  EXPECT_EQ(config::layer_pattern(hybrid),
            (std::vector<LayerKind>{LayerKind::mamba, LayerKind::attention, LayerKind::mlp, LayerKind::moe}));
  EXPECT_NE(config_error([] {
              config::layer_pattern(config::load_config("llama/tiny", {"model.hybrid_override_pattern=M*x"}));
            }).find("character 3 'x'"),
            std::string::npos);
  EXPECT_FALSE(
      config::unimplemented_features(config::load_config("tiny", {"model.tensor_model_parallel_size=2"})).empty());
  // Unset keys take their Bridge meaning.
  const config::Config bare =
      config::load_config_yaml("model:\n  hidden_size: 512\n  num_attention_heads: 8\n", "bare");
  EXPECT_EQ(config::model_spec(bare).ffn_hidden_size, 2048);
  EXPECT_EQ(config::model_spec(bare).num_query_groups, 8);
}

// Megatron's hybrid layer pattern as users type it: unquoted on the command line (a value starting
// with '*' is no YAML alias for a string key), under either of Megatron's names, one layer per letter.
// model.hybrid_override_pattern and model.hybrid_layer_pattern both set, in any order and from anywhere, are refused
// (they were: the last one won, silently), as Megatron's arguments.py and Bridge's HybridModelProvider refuse them,
// even with one pattern. The message names both keys, both values, where each was set, and the ways out.
// model.rotary_percent counts the rotated dimensions as Megatron does, int(head_dim x percent), and an odd count is
// refused with a share that gives an even one.
TEST(ModelConfig, RotaryPercentGivesMegatronsCountOfRotatedDimensions) {
  const auto spec = [](std::vector<std::string> overrides) {
    const config::ValidationReport r = config::validate(config::load_config("llama/tiny", std::move(overrides)));
    EXPECT_TRUE(r.ok());
    return config::model_spec(r.config);
  };
  EXPECT_EQ(spec({}).rotary_dim, 0);  // the whole head
  EXPECT_EQ(spec({"model.rotary_percent=1.0"}).rotary_dim, 0);
  EXPECT_EQ(spec({"model.rotary_percent=0.75"}).rotary_dim, 48);  // of 64
  EXPECT_EQ(spec({"model.rotary_percent=0.75"}).rope_rotated_dims(), 48);
  EXPECT_EQ(spec({"model.rotary_percent=0.5", "model.kv_channels=96"}).rotary_dim, 48);
  EXPECT_EQ(spec({"model.rotary_percent=0.97"}).rotary_dim, 62);  // int(62.08): toward zero
  const config::ValidationReport odd_report =
      config::validate(config::load_config("llama/tiny", {"model.rotary_percent=0.3"}));
  ASSERT_EQ(odd_report.violations.size(), 1u);
  const std::string odd = config::format_violation(odd_report.violations[0]);
  EXPECT_NE(odd.find("int(head_dim 64 x 0.3) = 19"), std::string::npos) << odd;
  EXPECT_NE(odd.find("e.g. 0.3125 (20 dimensions)"), std::string::npos) << odd;
}

// LongRoPE's keys: lists of numbers (YAML or an override's comma-separated text) that reach the spec as fp32, with the
// list a step's sequences use (seq_length against the original context) as the kernels' scaling.
TEST(ModelConfig, LongRopeKeysGiveTheSpecBothListsAndTheOneForSeqLength) {
  std::string short_list = "[1.0", long_list = "[1.0";
  for (int i = 1; i < 24; ++i) {  // rotary_percent 0.75 of 64: 24 pairs
    short_list += strprintf(", %g", 1.0 + 0.05 * i);
    long_list += strprintf(", %g", 1.0 + 1.5 * i);
  }
  short_list += "]";
  long_list += "]";
  const auto spec = [&](std::vector<std::string> more) {
    std::vector<std::string> overrides = {"model.rotary_percent=0.75", "model.longrope_short_factor=" + short_list,
                                          "model.longrope_long_factor=" + long_list,
                                          "model.longrope_attention_factor=1.19"};
    overrides.insert(overrides.end(), more.begin(), more.end());
    const config::ValidationReport r = config::validate(config::load_config("llama/tiny", overrides));
    EXPECT_TRUE(r.ok()) << (r.violations.empty() ? "" : config::format_violation(r.violations[0]));
    return config::model_spec(r.config);
  };
  const model::ModelSpec within = spec({"model.longrope_original_max_position_embeddings=256"});  // seq_length 256
  ASSERT_EQ(within.longrope.short_factor.size(), 24u);
  EXPECT_EQ(within.longrope.long_factor[23], 35.5f);
  EXPECT_EQ(within.longrope.attention_factor, 1.19);
  EXPECT_EQ(within.rope_scaling.longrope_pairs, 24);
  EXPECT_EQ(within.rope_scaling.longrope_factors[23], static_cast<float>(1.0 + 0.05 * 23)) << "the short list";
  EXPECT_EQ(within.rope_scaling.attention_factor, 1.19);
  const model::ModelSpec past = spec({"model.longrope_original_max_position_embeddings=255"});
  EXPECT_EQ(past.rope_scaling.longrope_factors[23], 35.5f) << "256 positions are past 255: the long list";
  EXPECT_EQ(model::hf_architecture(past), "Phi3ForCausalLM");
  // The emitted configuration reads back to the same lists.
  const config::Config c = config::load_config("llama/tiny", {"model.longrope_short_factor=1,1.5,2"});
  EXPECT_EQ(c.model.longrope_short_factor, (std::vector<double>{1.0, 1.5, 2.0}));
  EXPECT_NE(config::emit_yaml(c).find("  longrope_short_factor: [1.0, 1.5, 2.0]\n"), std::string::npos)
      << config::emit_yaml(c);
  EXPECT_NE(test::thrown_message([] {
              config::load_config("llama/tiny", {"model.longrope_short_factor=[1, x]"});
            }).find("model.longrope_short_factor[1]"),
            std::string::npos);
}

TEST(ModelConfig, BothHybridPatternNamesAreRefused) {
  // A recipe file with both: each value's line and column.
  std::string error = config_error([] {
    config::load_config_yaml(
        "model:\n  num_layers: 4\n  hybrid_override_pattern: \"M*-M\"\n  hybrid_layer_pattern: "
        "\"*-*-\"\n",
        "r.yaml");
  });
  for (const char* part : {"r.yaml:4:25: model.hybrid_layer_pattern = \"*-*-\", but model.hybrid_override_pattern = "
                           "\"M*-M\" is set too (at r.yaml:3:28)",
                           "two names of one key", "Megatron and Megatron-Bridge refuse both",
                           "Megatron's name is hybrid_layer_pattern", "model.hybrid_override_pattern=null"}) {
    EXPECT_NE(error.find(part), std::string::npos) << part << "\n" << error;
  }
  // The same pattern twice is refused too (Megatron asserts the newer name is unset).
  EXPECT_NE(config_error([] {
              config::load_config_yaml("model:\n  hybrid_layer_pattern: \"*-\"\n  hybrid_override_pattern: \"*-\"\n",
                                       "r.yaml");
            })
                .find("r.yaml:3:28: model.hybrid_override_pattern = \"*-\", but model.hybrid_layer_pattern = \"*-\" is "
                      "set too (at r.yaml:2:25)"),
            std::string::npos);
  // A shipped recipe's pattern and an override of the other name: the override's text, the recipe's position, the
  // override to write instead. The refused override changes nothing.
  config::Config c = config::load_config("hybrid/tiny_hybrid");
  error = config_error([&] { config::apply_override(c, "model.hybrid_layer_pattern=M*-M*-M-"); });
  for (const char* part :
       {"override 'model.hybrid_layer_pattern=M*-M*-M-': model.hybrid_layer_pattern = \"M*-M*-M-\", "
        "but model.hybrid_override_pattern = \"M*-M-M*-\" is set too (at recipes/hybrid/tiny_hybrid.yaml:",
        "model.hybrid_override_pattern=M*-M*-M- replaces it"}) {
    EXPECT_NE(error.find(part), std::string::npos) << part << "\n" << error;
  }
  EXPECT_EQ(c.model.hybrid_override_pattern, "M*-M-M*-");
  EXPECT_THROW(config::load_config("hybrid/tiny_hybrid", {"model.hybrid_layer_pattern=M*-M-M*-"}), config::ConfigError);
  // Two overrides, one of each name.
  error = config_error([] {
    config::load_config("llama/tiny", {"model.hybrid_layer_pattern=*-*-", "model.hybrid_override_pattern=*-*-"});
  });
  EXPECT_NE(
      error.find("override 'model.hybrid_override_pattern=*-*-': model.hybrid_override_pattern = \"*-*-\", but "
                 "model.hybrid_layer_pattern = \"*-*-\" is set too (at override 'model.hybrid_layer_pattern=*-*-')"),
      std::string::npos)
      << error;
  // One name at a time is fine: the same name again, the other after a null, a null under either name.
  EXPECT_EQ(config::load_config("hybrid/tiny_hybrid", {"model.hybrid_override_pattern=M*-M*-M-"})
                .model.hybrid_override_pattern,
            "M*-M*-M-");
  EXPECT_EQ(config::load_config("hybrid/tiny_hybrid",
                                {"model.hybrid_override_pattern=null", "model.hybrid_layer_pattern=M*-M*-M-"})
                .model.hybrid_override_pattern,
            "M*-M*-M-");
  EXPECT_EQ(
      config::load_config("hybrid/tiny_hybrid", {"model.hybrid_layer_pattern=null"}).model.hybrid_override_pattern,
      std::nullopt);
  EXPECT_EQ(
      config::load_config_yaml("model:\n  hybrid_override_pattern: null\n  hybrid_layer_pattern: \"*-\"\n", "r.yaml")
          .model.hybrid_override_pattern,
      "*-");
}

TEST(ModelConfig, HybridPatternOverridesAndSpellings) {
  config::Config c = config::load_config("llama/tiny");
  config::apply_override(c, "model.hybrid_override_pattern=M*-M*-");
  EXPECT_EQ(c.model.hybrid_override_pattern, "M*-M*-");
  config::apply_override(c, "model.hybrid_override_pattern=*-*-");
  EXPECT_EQ(c.model.hybrid_override_pattern, "*-*-");
  config::apply_override(c, "model.hybrid_override_pattern=null");  // one name at a time (both: refused, below)
  config::apply_override(c, "model.hybrid_layer_pattern=*--*");     // Megatron's newer name
  EXPECT_EQ(c.model.hybrid_override_pattern, "*--*");
  config::apply_override(c, "model.hybrid_layer_pattern=*-");
  EXPECT_EQ(c.model.hybrid_override_pattern, "*-");
  config::apply_override(c, "model.hybrid_layer_pattern=");         // unset under either name
  config::apply_override(c, "model.hybrid_override_pattern='*-'");  // quoting still works
  EXPECT_EQ(c.model.hybrid_override_pattern, "*-");
  // Only string keys take raw text: elsewhere a YAML error stays an error.
  EXPECT_NE(config_error([&] { config::apply_override(c, "model.num_layers=*-"); }).find("not a YAML value"),
            std::string::npos);
  // The emitted YAML quotes the pattern, so `config show` output loads again.
  config::apply_override(c, "model.hybrid_override_pattern=*-*-");
  EXPECT_EQ(config::load_config_yaml(config::emit_yaml(c), "emitted").model.hybrid_override_pattern, "*-*-");
  // Recipes: either name, not both.
  const config::Config yaml =
      config::load_config_yaml("model:\n  num_layers: 2\n  hybrid_layer_pattern: \"*-\"\n", "r.yaml");
  EXPECT_EQ(yaml.model.hybrid_override_pattern, "*-");
  EXPECT_NE(config_error([] {
              config::load_config_yaml("model:\n  hybrid_override_pattern: \"*-\"\n  hybrid_layer_pattern: \"*-\"\n",
                                       "r.yaml");
            }).find("two names of one key"),
            std::string::npos);

  // The pattern is the model: "*-*-" is four layers (not four GPT blocks of attention + MLP).
  config::Config hybrid = config::load_config("llama/tiny", {"model.hybrid_override_pattern=*-*-"});
  EXPECT_EQ(config::model_spec(hybrid).hybrid_layer_pattern, "*-*-");
  EXPECT_EQ(config::layer_pattern(hybrid).size(), 4u);
  EXPECT_EQ(config::describe_layers(hybrid), "4 layers: (*-)x2 (hybrid pattern)");
  config::apply_override(hybrid, "model.num_layers=3");
  EXPECT_EQ(config::describe_layers(hybrid), "");  // no valid stack: validation says why
  config::apply_override(hybrid, "model.num_layers=4");
  EXPECT_EQ(config::describe_layers(config::load_config("llama/tiny")), "8 layers: (*-)x4 as 4 GPT blocks");
  // A null mamba_num_heads stays null in the YAML (the checkpoint's config hash reads it); config show says
  // what it resolves to, only for a stack with Mamba layers.
  EXPECT_TRUE(config::describe_derived_shapes(hybrid).empty());
  const std::vector<std::string> derived = config::describe_derived_shapes(
      config::load_config("hybrid/tiny_hybrid", {"model.mamba_expand=3", "model.mamba_head_dim=32"}));
  ASSERT_EQ(derived.size(), 1u);
  EXPECT_EQ(derived[0],
            "model.mamba_num_heads: null = mamba_expand x hidden_size / mamba_head_dim = 3 x 256 / 32 = "
            "24 heads");
  EXPECT_TRUE(
      config::describe_derived_shapes(config::load_config("hybrid/tiny_hybrid", {"model.mamba_num_heads=8"})).empty());
  EXPECT_TRUE(config::validate(hybrid).ok());
  // Length against num_layers, and invalid letters, are rule 16 violations naming the key.
  const config::ValidationReport wrong_length =
      config::validate(config::load_config("llama/tiny", {"model.hybrid_override_pattern=*-*-*-"}));
  ASSERT_FALSE(wrong_length.ok());
  EXPECT_EQ(wrong_length.violations[0].rule, 16);
  EXPECT_NE(wrong_length.violations[0].message.find("has 6 layers but num_layers is 4"), std::string::npos)
      << wrong_length.violations[0].message;
  const config::ValidationReport bad_letter =
      config::validate(config::load_config("llama/tiny", {"model.hybrid_override_pattern=*-x-", "model.num_layers=4"}));
  ASSERT_FALSE(bad_letter.ok());
  EXPECT_NE(bad_letter.violations[0].message.find("character 3 'x'"), std::string::npos)
      << bad_letter.violations[0].message;
  // Mamba and MoE letters validate, and train refuses them until their kinds are built.
  const config::Config mamba =
      config::load_config("llama/tiny", {"model.hybrid_override_pattern=M*-M", "model.num_layers=4"});
  EXPECT_TRUE(config::validate(mamba).ok());
  if (!model::layer_kind_implemented(model::LayerKind::mamba)) {
    const auto missing = config::unimplemented_features(mamba);
    ASSERT_EQ(missing.size(), 1u);
    EXPECT_NE(missing[0].find("Mamba layer kind (M in the pattern; issue 12)"), std::string::npos) << missing[0];
  }
}

// Random override strings never crash the parser: each one applies or throws sg::Error.

}  // namespace
}  // namespace sg::config
