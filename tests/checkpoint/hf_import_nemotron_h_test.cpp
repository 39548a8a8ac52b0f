// read_hf_config on NemotronH folders (checkpoint/hf_import_nemotron_h.cpp): the config.json stepgraph writes
// (checkpoint/hf_config_nemotron_h.cpp) reads back as the same model; the newer layers_block_type list (both
// spellings of its names) gives the same pattern; Python's bare Infinity in time_step_limit is read; what stepgraph's NemotronH cannot run is refused naming the key.
#include <gtest/gtest.h>

#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>

#include "checkpoint/hf_config.h"
#include "checkpoint/hf_import.h"
#include "hf_test_folders.h"
#include "model/layer_registry.h"
#include "model/stack.h"
#include "test_dir.h"
#include "test_util.h"

namespace sg::checkpoint {
namespace {

// Every NemotronH layer kind, Nemotron 3's routing, a dt limit: the options the reader has to carry.
model::ModelSpec nemotron_spec() {
  model::ModelSpec s;
  s.hybrid_layer_pattern = "ME*-EM";
  s.num_layers = 6;
  s.vocab_size = 320;
  s.hidden_size = 96;
  s.ffn_hidden_size = 160;
  s.num_attention_heads = 4;
  s.num_query_groups = 2;
  s.kv_channels = 32;  // not 96 / 4
  s.seq_length = 512;
  s.layernorm_epsilon = 1e-6;
  s.position_embedding = model::PositionEmbedding::none;
  s.mlp_activation = model::MlpActivation::squared_relu;
  s.mamba.state_dim = 32;
  s.mamba.head_dim = 64;
  s.mamba.num_groups = 3;
  s.mamba.num_heads = 3;
  s.mamba.dt_limit_min = 0.001;
  s.mamba.dt_limit_max = 0.2;
  s.num_moe_experts = 6;
  s.moe_router_topk = 2;
  s.moe_ffn_hidden_size = 40;
  s.moe.score_function = ref::MoeScoreFunction::sigmoid;
  s.moe.shared_expert_intermediate_size = 56;
  s.moe.topk_scaling_factor = 2.5;
  return s;
}

using test::write_hf_config;

TEST(HfImportNemotronH, WhatStepgraphWritesReadsBackAsTheSameModel) {
  test::ScratchDir dir("nemotron_h_config");
  const model::ModelSpec s = nemotron_spec();
  ASSERT_EQ(model::hf_architecture(s), "NemotronHForCausalLM");
  const HfModelConfig hf = read_hf_config(write_hf_config(dir, "written", hf_nemotron_h_config(s)));
  EXPECT_EQ(hf.architecture, "NemotronHForCausalLM");
  const model::ModelSpec& r = hf.spec;
  EXPECT_EQ(r.hybrid_layer_pattern, s.hybrid_layer_pattern);
  EXPECT_EQ(r.num_layers, 6);
  EXPECT_EQ(r.vocab_size, s.vocab_size);
  EXPECT_EQ(r.hidden_size, s.hidden_size);
  EXPECT_EQ(r.ffn_hidden_size, s.ffn_hidden_size);
  EXPECT_EQ(r.num_attention_heads, s.num_attention_heads);
  EXPECT_EQ(r.num_query_groups, s.num_query_groups);
  EXPECT_EQ(r.head_dim(), 32);
  EXPECT_EQ(r.layernorm_epsilon, s.layernorm_epsilon);
  EXPECT_EQ(r.position_embedding, model::PositionEmbedding::none);
  EXPECT_EQ(r.mlp_activation, model::MlpActivation::squared_relu);
  EXPECT_EQ(r.mamba.state_dim, 32);
  EXPECT_EQ(r.mamba.num_groups, 3);
  EXPECT_EQ(r.mamba_heads(), 3);
  EXPECT_EQ(r.mamba.dt_limit_min, 0.001);
  EXPECT_EQ(r.mamba.dt_limit_max, 0.2);
  EXPECT_EQ(r.num_moe_experts, 6);
  EXPECT_EQ(r.moe_router_topk, 2);
  EXPECT_EQ(r.moe_ffn_hidden_size, 40);
  EXPECT_EQ(r.moe.shared_expert_intermediate_size, 56);
  EXPECT_EQ(r.moe.topk_scaling_factor, 2.5);
  EXPECT_EQ(r.moe.score_function, ref::MoeScoreFunction::sigmoid);
  EXPECT_EQ(hf.max_position_embeddings, 512);
  // The tensors of the model read back are the tensors of the model written.
  const model::ModelLayout written = model::model_layout(s), back = model::model_layout(r);
  ASSERT_EQ(written.tensors().size(), back.tensors().size());
  for (size_t i = 0; i < written.tensors().size(); ++i) {
    EXPECT_EQ(written.tensors()[i].name, back.tensors()[i].name);
    EXPECT_EQ(written.tensors()[i].shape, back.tensors()[i].shape) << written.tensors()[i].name;
  }

  // The Hub's older configs name the head dim attention_head_dim (Nemotron Nano 9B v2: 128 for 4480 / 40).
  nlohmann::json older = hf_nemotron_h_config(s);
  older.erase("head_dim");
  older["attention_head_dim"] = 48;
  EXPECT_EQ(read_hf_config(write_hf_config(dir, "older", older)).spec.head_dim(), 48);
  // Neither key, nor num_key_value_heads: NemotronHConfig's defaults, head_dim 128 and 8 key/value heads (not
  // hidden_size / heads and one a head).
  nlohmann::json bare = hf_nemotron_h_config(s);
  bare.erase("head_dim");
  bare.erase("num_key_value_heads");
  bare["num_attention_heads"] = 16;
  const model::ModelSpec defaults = read_hf_config(write_hf_config(dir, "bare", bare)).spec;
  EXPECT_EQ(defaults.head_dim(), 128);
  EXPECT_EQ(defaults.num_query_groups, 8);
  bare["num_attention_heads"] = 12;
  const std::string error = test::thrown_message([&] { read_hf_config(write_hf_config(dir, "bare12", bare)); });
  EXPECT_NE(error.find("num_key_value_heads = 8 (absent: NemotronHConfig's default) does not divide "
                       "num_attention_heads = 12"),
            std::string::npos)
      << error;

  // No limit written: transformers' (0, inf).
  model::ModelSpec unlimited = s;
  unlimited.mamba.dt_limit_min = 0.0;
  unlimited.mamba.dt_limit_max = std::numeric_limits<double>::infinity();
  const HfModelConfig open = read_hf_config(write_hf_config(dir, "unlimited", hf_nemotron_h_config(unlimited)));
  EXPECT_EQ(open.spec.mamba.dt_limit_max, std::numeric_limits<double>::infinity());

  // Python's json.dumps writes the default limit with a bare Infinity, not JSON (transformers 4, NVIDIA's releases
  // of Nemotron 3): read as transformers 5's {"__float__": "Infinity"}.
  std::string text = hf_nemotron_h_config(s).dump(2);
  const std::string limit = "\"time_step_limit\": [\n    0.001,\n    0.2\n  ]";
  ASSERT_NE(text.find(limit), std::string::npos) << text;
  text.replace(text.find(limit), limit.size(), "\"time_step_limit\": [0.0, Infinity]");
  const std::string folder = dir.str() + "/python_infinity";
  std::filesystem::create_directories(folder);
  std::ofstream(folder + "/config.json") << text;
  const HfModelConfig python = read_hf_config(folder);
  EXPECT_EQ(python.spec.mamba.dt_limit_min, 0.0);
  EXPECT_EQ(python.spec.mamba.dt_limit_max, std::numeric_limits<double>::infinity());
}

TEST(HfImportNemotronH, TheNewerLayerTypeListGivesTheSamePattern) {
  test::ScratchDir dir("nemotron_h_types");
  nlohmann::json config = hf_nemotron_h_config(nemotron_spec());
  config.erase("hybrid_override_pattern");
  config["layers_block_type"] = {"linear_attention", "moe", "full_attention", "mlp", "moe", "mamba"};
  EXPECT_EQ(read_hf_config(write_hf_config(dir, "new", config)).spec.hybrid_layer_pattern, "ME*-EM");
  config["layers_block_type"] = {"mamba", "moe", "attention", "mlp", "moe", "mamba"};
  EXPECT_EQ(read_hf_config(write_hf_config(dir, "old_names", config)).spec.hybrid_layer_pattern, "ME*-EM");
  config["layers_block_type"] = {"mamba", "moe", "sliding_attention", "mlp", "moe", "mamba"};
  EXPECT_NE(test::thrown_message([&] {
              read_hf_config(write_hf_config(dir, "unknown", config));
            }).find("layers_block_type holds \"sliding_attention\""),
            std::string::npos);
}

TEST(HfImportNemotronH, WhatItCannotRunIsRefusedNamingTheKey) {
  test::ScratchDir dir("nemotron_h_refused");
  struct Defect {
    const char* key;
    nlohmann::json value;
    const char* expected;
  };
  const Defect defects[] = {
      {"mlp_hidden_act", "gelu", "mlp_hidden_act = \"gelu\": stepgraph's NemotronH MLPs and experts are squared ReLU"},
      {"moe_latent_size", 64, "moe_latent_size is set: stepgraph's experts read the hidden state"},
      {"topk_group", 2, "topk_group = 2 of n_group = 1: group-limited routing is not implemented"},
      {"norm_topk_prob", false, "norm_topk_prob = false with num_experts_per_tok = 2"},
      {"num_hidden_layers", 7, "num_hidden_layers = 7, but the layer pattern ME*-EM has 6 layers"},
      {"mlp_bias", true, "mlp_bias = true: stepgraph's NemotronH has no biases"},
      {"hybrid_override_pattern", "ME*|-EM", "Megatron's pipeline-stage separator"},
  };
  for (const Defect& d : defects) {
    SCOPED_TRACE(d.key);
    nlohmann::json config = hf_nemotron_h_config(nemotron_spec());
    config[d.key] = d.value;
    const std::string folder = write_hf_config(dir, d.key, config);
    const std::string message = test::thrown_message([&] { read_hf_config(folder); });
    EXPECT_NE(message.find(folder + "/config.json: "), std::string::npos) << message;
    EXPECT_NE(message.find(d.expected), std::string::npos) << message;
  }
}

}  // namespace
}  // namespace sg::checkpoint
