// A config Megatron-Bridge saved loads as its keys: Hydra's _target_ (the class Bridge instantiates a section with)
// is skipped at the top and in every section, and Megatron's model.transformer map (the TransformerConfig a GPT or
// hybrid model config holds) gives model keys, in files and as model.transformer.KEY overrides; a key given both
// ways is refused as given twice.
#include <gtest/gtest.h>

#include <string>

#include "config/config.h"

namespace sg::config {
namespace {

const char kSaved[] =
    "_target_: megatron.bridge.training.config.ConfigContainer\n"
    "model:\n"
    "  _target_: megatron.training.models.gpt.GPTModelConfig\n"
    "  transformer:\n"
    "    _target_: megatron.core.transformer.transformer_config.TransformerConfig\n"
    "    num_layers: 2\n"
    "    hidden_size: 64\n"
    "    num_attention_heads: 4\n"
    "  seq_length: 32\n"
    "train:\n"
    "  _target_: megatron.bridge.training.config.TrainingConfig\n"
    "  micro_batch_size: 2\n";

std::string error_of(const std::string& yaml) {
  try {
    load_config_yaml(yaml, "saved.yaml");
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

TEST(BridgeSavedLayout, TargetsAreSkippedAndTheTransformerMapGivesModelKeys) {
  const Config c = load_config_yaml(kSaved, "saved.yaml");
  EXPECT_EQ(c.model.num_layers, 2);
  EXPECT_EQ(c.model.hidden_size, 64);
  EXPECT_EQ(c.model.num_attention_heads, 4);
  EXPECT_EQ(c.model.seq_length, 32);
  EXPECT_EQ(c.train.micro_batch_size.value_or(0), 2);
  // Written back in stepgraph's own layout, which reads back the same.
  const std::string yaml = emit_yaml(c);
  EXPECT_EQ(yaml.find("_target_"), std::string::npos);
  EXPECT_EQ(yaml.find("transformer:"), std::string::npos);
  EXPECT_EQ(emit_yaml(load_config_yaml(yaml, "emitted")), yaml);
}

TEST(BridgeSavedLayout, AKeyGivenBothWaysIsGivenTwice) {
  const std::string twice = error_of("model:\n  num_layers: 3\n  transformer:\n    num_layers: 2\n");
  EXPECT_NE(twice.find("saved.yaml:4:5: key 'model.num_layers' appears twice"), std::string::npos) << twice;
  // transformer as a value is no map of keys: the unknown key it is.
  EXPECT_NE(error_of("model:\n  transformer: 3\n").find("unknown key 'model.transformer'"), std::string::npos);
}

TEST(BridgeSavedLayout, ModelTransformerOverridesAreModelKeys) {
  Config c = load_config_yaml(kSaved, "saved.yaml");
  apply_override(c, "model.transformer.num_layers=6");
  EXPECT_EQ(c.model.num_layers, 6);
  EXPECT_TRUE(looks_like_dotted_override("model.transformer.hidden_size=128"));
  EXPECT_FALSE(looks_like_dotted_override("train.transformer.hidden_size=128"));
  EXPECT_THROW(apply_override(c, "model._target_=x"), ConfigError);
  // The empty-value guards see the key it stands for.
  EXPECT_THROW(apply_override(c, "model.transformer.recompute_modules="), ConfigError);
  EXPECT_THROW(apply_override(c, "train.transformer.num_layers=2"), ConfigError);
}

}  // namespace
}  // namespace sg::config
