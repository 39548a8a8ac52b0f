// read_hf_config and the weights of Phi-3 folders (model_type "phi3", Phi3ForCausalLM): Llama's blocks with q, k and v
// in one self_attn.qkv_proj and gate and up in one mlp.gate_up_proj (checkpoint/hf_fused_tensors.h), read in place as
// the model's own tensors, element for element, from one file or shards; Phi3Config's defaults for absent keys (no
// sliding window, rms_norm_eps 1e-5, 4096 positions); a partial rotary factor as the share of each head RoPE rotates;
// a fused tensor that is not its parts stacked refused by name.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "checkpoint/hf_import.h"
#include "checkpoint/safetensors.h"
#include "hf_test_folders.h"
#include "model/layer_registry.h"
#include "model/stack.h"
#include "test_util.h"

namespace sg::checkpoint {
namespace {

using test::make_hf_llama_folder;

TEST(HfImportPhi3, FusedTensorsLoadAsTheModelsOwn) {
  test::ScratchDir dir("hf_import_phi3");
  for (const char* layout_flags : {"--dtype bf16", "--dtype fp32 --shards 3"}) {
    SCOPED_TRACE(layout_flags);
    const std::string folder =
        make_hf_llama_folder(dir.str() + "/phi3_" + std::to_string(std::strlen(layout_flags)),
                             std::string(layout_flags) + " --phi3 128");
    const HfModelConfig config = read_hf_config(folder);
    EXPECT_EQ(config.architecture, "Phi3ForCausalLM");
    EXPECT_EQ(config.sliding_window, 128);
    EXPECT_EQ(config.spec.num_query_groups, 2);
    EXPECT_FALSE(config.spec.add_qkv_bias || config.spec.add_bias_linear || config.spec.qk_layernorm);
    test::expect_loaded_weights_equal_expected(folder, model::model_layout(config.spec));
  }
  const HfModelConfig open = read_hf_config(make_hf_llama_folder(dir.str() + "/absent_window", "--phi3 -1"));
  EXPECT_FALSE(open.sliding_window.has_value());  // Phi3Config's default: none
}

// A folder with one config.json edit, copied from a Phi-3 folder of head_dim 8.
class HfImportPhi3Edited : public ::testing::Test {
 protected:
  test::ScratchDir dir{"hf_import_phi3_edited"};
  std::string folder = make_hf_llama_folder(dir.str() + "/phi3", "--dtype bf16 --phi3 0");
  template <class Edit>
  std::string edited(const std::string& name, const Edit& edit) {
    const std::string copy = dir.str() + "/" + name;
    std::filesystem::copy(folder, copy);
    nlohmann::json config = nlohmann::json::parse(std::ifstream(copy + "/config.json"));
    edit(config);
    std::ofstream(copy + "/config.json") << config.dump(2);
    return copy;
  }
};

// Phi3's partial_rotary_factor (Phi-4-mini's 0.75), at the top level or in transformers 5's rope_parameters: RoPE
// rotates int(head_dim x factor) dimensions of each head (model.rotary_percent), which must be even.
TEST_F(HfImportPhi3Edited, APartialRotaryFactorRotatesThatShareOfEachHead) {
  const auto rotary_dim = [&](const std::string& name, const auto& edit) {
    return read_hf_config(edited(name, edit)).spec.rotary_dim;
  };
  EXPECT_EQ(read_hf_config(folder).spec.rotary_dim, 0);
  EXPECT_EQ(rotary_dim("top", [](nlohmann::json& c) { c["partial_rotary_factor"] = 0.75; }), 6);  // of 8
  EXPECT_EQ(rotary_dim("whole", [](nlohmann::json& c) { c["partial_rotary_factor"] = 1.0; }), 0);
  EXPECT_EQ(
      rotary_dim(
          "v5",
          [](nlohmann::json& c) {
            c.erase("partial_rotary_factor");
            c["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 10000.0}, {"partial_rotary_factor", 0.5}};
          }),
      4);
  EXPECT_EQ(
      rotary_dim(
          "both",
          [](nlohmann::json& c) {
            c["partial_rotary_factor"] = 0.3;  // int(2.4) = 2
            c["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 10000.0}, {"partial_rotary_factor", 0.3}};
          }),
      2);
  // Its checkpoints load as Phi-3 too (tests/checkpoint/hf_export_phi3_test.cpp).
  EXPECT_EQ(model::hf_architecture(read_hf_config(dir.str() + "/top").spec), "Phi3ForCausalLM");

  std::string error = test::thrown_message(
      [&] { read_hf_config(edited("odd", [](nlohmann::json& c) { c["partial_rotary_factor"] = 0.2; })); });
  EXPECT_NE(error.find("partial_rotary_factor = 0.2 rotates int(head_dim 8 x 0.2) = 1 dimensions"), std::string::npos)
      << error;
  error = test::thrown_message(
      [&] { read_hf_config(edited("over", [](nlohmann::json& c) { c["partial_rotary_factor"] = 1.5; })); });
  EXPECT_NE(error.find("it must be in (0, 1]"), std::string::npos) << error;
  error = test::thrown_message([&] {
    read_hf_config(edited("disagree", [](nlohmann::json& c) {
      c["partial_rotary_factor"] = 0.75;
      c["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 10000.0}, {"partial_rotary_factor", 0.5}};
    }));
  });
  EXPECT_NE(error.find("rope_parameters.partial_rotary_factor = 0.5: partial_rotary_factor says 0.75"),
            std::string::npos)
      << error;
}

TEST_F(HfImportPhi3Edited, AFusedTensorOfAnotherShapeIsRefused) {
  // 4 key/value heads where the files hold 2: qkv_proj is not the model's q, k and v stacked.
  const std::string heads = edited("heads", [](nlohmann::json& c) { c["num_key_value_heads"] = 4; });
  const HfModelConfig config = read_hf_config(heads);
  std::vector<float> weights;
  const std::string error = test::thrown_message(
      [&] { load_hf_weights(heads, model::model_layout(config.spec), weights, WeightSource::model, "test"); });
  EXPECT_NE(error.find("different  model.layers.0.self_attn.qkv_proj.weight: checkpoint [64, 32], expected [96, 32] "
                       "(its parts stacked)"),
            std::string::npos)
      << error;
  EXPECT_NE(error.find("missing    model.layers.0.self_attn.q_proj.weight"), std::string::npos) << error;
}

}  // namespace
}  // namespace sg::checkpoint
