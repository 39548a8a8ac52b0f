// read_hf_config on Mistral folders (model_type "mistral", MistralForCausalLM): Llama's tensors and blocks with
// MistralConfig's defaults for the keys a config.json leaves out (8 key/value heads, 131072 positions, a 4096-token
// sliding_window) and the window itself (null: none); what Mistral has not (biases) is refused naming the key. The
// weights load as a Llama folder's, element for element.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "checkpoint/hf_import.h"
#include "hf_test_folders.h"
#include "model/layer_registry.h"
#include "model/stack.h"
#include "test_util.h"

namespace sg::checkpoint {
namespace {

using test::make_hf_llama_folder;
using test::write_hf_config;

TEST(HfImportMistral, AFolderLoadsAsLlamaWithItsWindow) {
  test::ScratchDir dir("hf_import_mistral");
  const std::string folder = make_hf_llama_folder(dir.str() + "/windowed", "--dtype bf16 --mistral 128");
  const HfModelConfig config = read_hf_config(folder);
  EXPECT_EQ(config.architecture, "MistralForCausalLM");
  ASSERT_TRUE(config.sliding_window.has_value());
  EXPECT_EQ(*config.sliding_window, 128);
  const model::ModelSpec& s = config.spec;
  EXPECT_EQ(s.num_query_groups, 2);
  EXPECT_EQ(s.head_dim(), 8);
  EXPECT_FALSE(s.add_qkv_bias || s.add_bias_linear || s.qk_layernorm);
  EXPECT_EQ(model::hf_architecture(s), "LlamaForCausalLM");  // what a checkpoint of it is written as

  test::expect_loaded_weights_equal_expected(folder, model::model_layout(s));

  const std::string null_window = make_hf_llama_folder(dir.str() + "/null_window", "--mistral 0");
  EXPECT_FALSE(read_hf_config(null_window).sliding_window.has_value());
  EXPECT_EQ(read_hf_config(make_hf_llama_folder(dir.str() + "/absent_window", "--mistral -1")).sliding_window, 4096);
}

// The keys a hand-written config.json leaves out take MistralConfig's defaults; a bias or a window that is no
// length is refused by its key.
TEST(HfImportMistral, AbsentKeysTakeMistralConfigsDefaultsAndBiasesAreRefused) {
  test::ScratchDir dir("hf_import_mistral_defaults");
  nlohmann::json bare = {{"model_type", "mistral"},      {"vocab_size", 320},         {"hidden_size", 64},
                         {"intermediate_size", 96},       {"num_hidden_layers", 2},    {"num_attention_heads", 16}};
  const HfModelConfig defaults = read_hf_config(write_hf_config(dir, "bare", bare));
  EXPECT_EQ(defaults.spec.num_query_groups, 8);
  EXPECT_EQ(defaults.max_position_embeddings, 131072);
  EXPECT_EQ(defaults.sliding_window, 4096);
  EXPECT_DOUBLE_EQ(defaults.spec.layernorm_epsilon, 1e-6);
  EXPECT_DOUBLE_EQ(defaults.spec.rotary_base, 10000.0);

  nlohmann::json biased = bare;
  biased["attention_bias"] = true;
  std::string error = test::thrown_message([&] { read_hf_config(write_hf_config(dir, "biased", biased)); });
  EXPECT_NE(error.find("attention_bias = true: stepgraph's MistralForCausalLM has no such biases"), std::string::npos)
      << error;
  nlohmann::json negative = bare;
  negative["sliding_window"] = -4;
  error = test::thrown_message([&] { read_hf_config(write_hf_config(dir, "negative", negative)); });
  EXPECT_NE(error.find("sliding_window = -4: expected a positive integer"), std::string::npos) << error;
  nlohmann::json other = bare;
  other["model_type"] = "gemma";
  error = test::thrown_message([&] { read_hf_config(write_hf_config(dir, "other", other)); });
  EXPECT_NE(error.find("Mistral (\"mistral\")"), std::string::npos) << error;
}

}  // namespace
}  // namespace sg::checkpoint
