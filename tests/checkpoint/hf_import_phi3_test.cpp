// read_hf_config and the weights of Phi-3 folders (model_type "phi3", Phi3ForCausalLM): Llama's blocks with q, k and v
// in one self_attn.qkv_proj and gate and up in one mlp.gate_up_proj (checkpoint/hf_fused_tensors.h), read in place as
// the model's own tensors, element for element, from one file or shards; Phi3Config's defaults for absent keys (no
// sliding window, rms_norm_eps 1e-5, 4096 positions); a partial rotary factor and a fused tensor that is not its
// parts stacked are refused by name.
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

TEST(HfImportPhi3, APartialRotaryFactorOrAFusedTensorOfAnotherShapeIsRefused) {
  test::ScratchDir dir("hf_import_phi3_refused");
  const std::string folder = make_hf_llama_folder(dir.str() + "/phi3", "--dtype bf16 --phi3 0");
  const auto edited = [&](const std::string& name, const auto& edit) {
    const std::string copy = dir.str() + "/" + name;
    std::filesystem::copy(folder, copy);
    nlohmann::json config = nlohmann::json::parse(std::ifstream(copy + "/config.json"));
    edit(config);
    std::ofstream(copy + "/config.json") << config.dump(2);
    return copy;
  };
  std::string error = test::thrown_message(
      [&] { read_hf_config(edited("partial", [](nlohmann::json& c) { c["partial_rotary_factor"] = 0.75; })); });
  EXPECT_NE(error.find("partial_rotary_factor = 0.75: stepgraph's RoPE rotates every dimension of a head"),
            std::string::npos)
      << error;
  error = test::thrown_message([&] {
    read_hf_config(edited("partial_v5", [](nlohmann::json& c) {
      c["rope_parameters"] = {{"rope_type", "default"}, {"rope_theta", 10000.0}, {"partial_rotary_factor", 0.5}};
    }));
  });
  EXPECT_NE(error.find("rope_parameters.partial_rotary_factor = 0.5"), std::string::npos) << error;

  // 4 key/value heads where the files hold 2: qkv_proj is not the model's q, k and v stacked.
  const std::string heads = edited("heads", [](nlohmann::json& c) { c["num_key_value_heads"] = 4; });
  const HfModelConfig config = read_hf_config(heads);
  std::vector<float> weights;
  error = test::thrown_message(
      [&] { load_hf_weights(heads, model::model_layout(config.spec), weights, WeightSource::model, "test"); });
  EXPECT_NE(error.find("different  model.layers.0.self_attn.qkv_proj.weight: checkpoint [64, 32], expected [96, 32] "
                       "(its parts stacked)"),
            std::string::npos)
      << error;
  EXPECT_NE(error.find("missing    model.layers.0.self_attn.q_proj.weight"), std::string::npos) << error;
}

}  // namespace
}  // namespace sg::checkpoint
