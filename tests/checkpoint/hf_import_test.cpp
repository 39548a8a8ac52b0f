// Loading Hugging Face Llama folders (checkpoint/hf_import.h). The folders are written by
// tests/checkpoint/make_hf_llama.py with numpy + safetensors (scripts/setup.sh installs both; without
// them this FAILS): one file or shards with model.safetensors.index.json, BF16, F16 or F32, tied or
// untied, Llama 3 rope_scaling in the transformers 4 and 5 spellings. Every loaded tensor must equal
// the script's expected.safetensors element for element; each broken folder must be refused naming
// the tensor, the file or the config.json key: NaN/Inf weights, unreadable dtypes, a stale
// model.safetensors beside an index, shards missing or outside the folder, an index that does not match
// its shards, config.json values no model has. A stepgraph checkpoint folder: hf_import_stepgraph_folder_test.cpp.
#include "checkpoint/hf_import.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "checkpoint/checkpoint_dir.h"
#include "checkpoint/hf_config.h"
#include "checkpoint/safetensors.h"
#include "checkpoint_test_util.h"
#include "hf_test_folders.h"
#include "model/layer_registry.h"
#include "model/stack.h"
#include "process_util.h"
#include "test_util.h"

namespace sg::checkpoint {
namespace {

using test::make_hf_llama_folder;

// Every tensor of the layout equals the script's expected.safetensors; the alignment gaps are zero.
void expect_weights_equal_expected(const std::string& folder, const model::ModelLayout& layout,
                                   const std::vector<float>& weights) {
  const SafetensorsFile expected(folder + "/expected.safetensors");
  std::vector<bool> covered(weights.size(), false);
  for (const auto& t : layout.tensors()) {
    const auto* e = expected.find(t.name);
    ASSERT_NE(e, nullptr) << t.name;
    ASSERT_EQ(e->shape, t.shape) << t.name;
    std::vector<float> want(static_cast<size_t>(t.numel));
    std::memcpy(want.data(), e->data, want.size() * 4);
    for (int64_t i = 0; i < t.numel; ++i) {
      ASSERT_EQ(weights[t.offset + i], want[i]) << t.name << "[" << i << "]";
      covered[t.offset + i] = true;
    }
  }
  for (size_t i = 0; i < weights.size(); ++i) {
    if (!covered[i]) {
      ASSERT_EQ(weights[i], 0.0f) << "gap element " << i;
    }
  }
}

struct Variant {
  const char* name;
  const char* args;
  bool tied;
  double rope_factor;
  const char* expect_files;  // in the description
};

TEST(HfImport, LoadsEveryFolderLayout) {
  test::ScratchDir dir("hf_import");
  const Variant variants[] = {
      {"bf16_one_file", "--dtype bf16", false, 0.0, "model.safetensors (BF16)"},
      {"fp32_three_shards_tied", "--dtype fp32 --shards 3 --tied", true, 0.0, "3 shards"},
      {"bf16_two_shards_llama3", "--dtype bf16 --shards 2 --rope-scaling 8 --eos 5", false, 8.0, "2 shards"},
      {"fp16_one_file", "--dtype fp16", false, 0.0, "model.safetensors (F16)"},
      {"fp16_two_shards_tied", "--dtype fp16 --shards 2 --tied", true, 0.0,
       "2 shards of model.safetensors.index.json (F16)"},
      {"fp32_transformers5_rope_parameters",
       "--dtype fp32 --tied --rope-scaling 32 --rope-parameters --rope-theta 500000", true, 32.0,
       "model.safetensors (F32)"},
  };
  for (const Variant& v : variants) {
    SCOPED_TRACE(v.name);
    const std::string folder = make_hf_llama_folder(dir.str() + "/" + v.name, v.args);
    EXPECT_EQ(resolve_model_folder(folder, "test"), folder);
    const HfModelConfig config = read_hf_config(folder);
    const model::ModelSpec& s = config.spec;
    EXPECT_EQ(s.vocab_size, 64);
    EXPECT_EQ(s.hidden_size, 32);
    EXPECT_EQ(s.ffn_hidden_size, 48);
    EXPECT_EQ(s.num_layers, 2);
    EXPECT_EQ(s.num_attention_heads, 4);
    EXPECT_EQ(s.num_query_groups, 2);
    EXPECT_EQ(s.seq_length, 256);
    EXPECT_EQ(s.layernorm_epsilon, 1e-5);
    EXPECT_EQ(s.share_embeddings_and_output_weights, v.tied);
    EXPECT_EQ(s.rope_scaling.factor, v.rope_factor);
    if (v.rope_factor > 0) {
      EXPECT_EQ(s.rope_scaling.original_max_position_embeddings, 64.0);
      EXPECT_EQ(s.rope_scaling.high_freq_factor, 4.0);
    }
    EXPECT_EQ(s.rotary_base, std::string(v.args).find("500000") != std::string::npos ? 500000.0 : 10000.0);
    const model::ModelLayout layout = model::model_layout(s);
    std::vector<float> weights;
    const std::string what = load_hf_weights(folder, layout, weights, WeightSource::model, "test");
    EXPECT_NE(what.find(v.expect_files), std::string::npos) << what;
    expect_weights_equal_expected(folder, layout, weights);
  }
  EXPECT_EQ(read_hf_config(dir.str() + "/bf16_two_shards_llama3").eos_token_ids, (std::vector<int64_t>{5}));
  // generation_config.json's eos_token_id stops a sequence too (transformers' generate() reads it: Llama 3
  // Instruct's end-of-turn token is only there); each id once.
  const std::string with_generation = dir.str() + "/with_generation_config";
  std::filesystem::create_directories(with_generation);
  std::filesystem::copy_file(dir.str() + "/bf16_two_shards_llama3/config.json", with_generation + "/config.json");
  std::ofstream(with_generation + "/generation_config.json") << R"({"eos_token_id": [5, 63], "do_sample": true})";
  EXPECT_EQ(read_hf_config(with_generation).eos_token_ids, (std::vector<int64_t>{5, 63}));
  std::ofstream(with_generation + "/generation_config.json") << "{\"eos_token_id\": 7";
  const std::string broken = test::thrown_message([&] { read_hf_config(with_generation); });
  EXPECT_NE(broken.find(with_generation + "/generation_config.json is not valid JSON"), std::string::npos) << broken;
}

// A Qwen3 folder: Llama's tensors plus each attention's q_norm and k_norm, read into a model with qk_layernorm; its
// config.json round-trips through hf_model_config (what a stepgraph checkpoint of that model writes). A folder
// whose attention is windowed is refused, naming the key.
TEST(HfImport, Qwen3FolderLoadsWithItsQueryAndKeyNorms) {
  test::ScratchDir dir("hf_import_qwen3");
  const std::string folder = make_hf_llama_folder(dir.str() + "/qwen3", "--dtype bf16 --qwen3");
  const HfModelConfig config = read_hf_config(folder);
  EXPECT_EQ(config.architecture, "Qwen3ForCausalLM");
  const model::ModelSpec& s = config.spec;
  EXPECT_TRUE(s.qk_layernorm);
  EXPECT_EQ(s.head_dim(), 8);
  EXPECT_EQ(s.num_query_groups, 2);
  EXPECT_EQ(model::hf_architecture(s), "Qwen3ForCausalLM");
  const model::ModelLayout layout = model::model_layout(s);
  std::vector<float> weights;
  load_hf_weights(folder, layout, weights, WeightSource::model, "test");
  expect_weights_equal_expected(folder, layout, weights);
  int norms = 0;
  for (const auto& t : layout.tensors()) norms += t.name.find("_norm.weight") != std::string::npos ? 1 : 0;
  EXPECT_EQ(norms, 4);  // q_norm and k_norm of 2 layers

  // The config.json stepgraph writes for that model reads back as the same model.
  const std::string written = dir.str() + "/written";
  std::filesystem::create_directories(written);
  std::ofstream(written + "/config.json") << hf_model_config(s, "bfloat16").dump(2);
  const model::ModelSpec back = read_hf_config(written).spec;
  EXPECT_TRUE(back.qk_layernorm);
  EXPECT_EQ(back.head_dim(), s.head_dim());
  EXPECT_EQ(back.num_query_groups, s.num_query_groups);
  EXPECT_EQ(back.layernorm_epsilon, s.layernorm_epsilon);

  // A Llama folder's weights lack the norms: a Qwen3 model cannot load them.
  const std::string llama = make_hf_llama_folder(dir.str() + "/llama", "--dtype bf16");
  model::ModelSpec with_norms = read_hf_config(llama).spec;
  with_norms.qk_layernorm = true;
  const std::string missing = test::thrown_message(
      [&] { load_hf_weights(llama, model::model_layout(with_norms), weights, WeightSource::model, "test"); });
  EXPECT_NE(missing.find("model.layers.0.self_attn.q_norm.weight"), std::string::npos) << missing;

  const std::string sliding = make_hf_llama_folder(dir.str() + "/sliding", "--dtype bf16 --qwen3 --break sliding");
  const std::string error = test::thrown_message([&] { read_hf_config(sliding); });
  EXPECT_NE(error.find("use_sliding_window = true: stepgraph's attention is fully causal"), std::string::npos) << error;
}

// Loads `folder` into `layout` (every value what the folder holds) and returns how many linear biases ("_proj.bias")
// the layout has, each checked to hold the folder's values, not the zeros of the init.
int load_folder_with_biases(const std::string& folder, const model::ModelLayout& layout, std::vector<float>& weights) {
  load_hf_weights(folder, layout, weights, WeightSource::model, "test");
  expect_weights_equal_expected(folder, layout, weights);
  int biases = 0;
  for (const auto& t : layout.tensors()) {
    if (t.name.find("_proj.bias") == std::string::npos) continue;
    ++biases;
    float largest = 0.0f;
    for (int64_t i = 0; i < t.numel; ++i) largest = std::max(largest, std::fabs(weights[t.offset + i]));
    EXPECT_GT(largest, 0.0f) << t.name;
  }
  return biases;
}

// A Qwen2 folder: Llama's tensors plus each attention's q_proj, k_proj and v_proj biases, read into a model with
// add_qkv_bias (the three land in one [qkv_dim] block, values as the folder holds them); its config.json round-trips
// through hf_model_config. A Llama model cannot load its biases, nor a Qwen2 model a Llama folder; a windowed
// attention is refused.
TEST(HfImport, Qwen2FolderLoadsWithItsQkvBiases) {
  test::ScratchDir dir("hf_import_qwen2");
  const std::string folder = make_hf_llama_folder(dir.str() + "/qwen2", "--dtype bf16 --qwen2");
  const HfModelConfig config = read_hf_config(folder);
  EXPECT_EQ(config.architecture, "Qwen2ForCausalLM");
  const model::ModelSpec& s = config.spec;
  EXPECT_TRUE(s.add_qkv_bias);
  EXPECT_FALSE(s.qk_layernorm);
  EXPECT_EQ(s.num_query_groups, 2);
  EXPECT_EQ(model::hf_architecture(s), "Qwen2ForCausalLM");
  const model::ModelLayout layout = model::model_layout(s);
  std::vector<float> weights;
  const int biases = load_folder_with_biases(folder, layout, weights);
  EXPECT_EQ(biases, 6);  // q, k and v of 2 layers

  const std::string written = dir.str() + "/written";
  std::filesystem::create_directories(written);
  std::ofstream(written + "/config.json") << hf_model_config(s, "bfloat16").dump(2);
  const HfModelConfig back = read_hf_config(written);
  EXPECT_EQ(back.architecture, "Qwen2ForCausalLM");
  EXPECT_TRUE(back.spec.add_qkv_bias);
  EXPECT_EQ(back.spec.head_dim(), s.head_dim());
  EXPECT_EQ(back.spec.num_query_groups, s.num_query_groups);

  model::ModelSpec without = s;
  without.add_qkv_bias = false;
  const std::string extra = test::thrown_message(
      [&] { load_hf_weights(folder, model::model_layout(without), weights, WeightSource::model, "test"); });
  EXPECT_NE(extra.find("model.layers.0.self_attn.q_proj.bias"), std::string::npos) << extra;
  const std::string llama = make_hf_llama_folder(dir.str() + "/llama", "--dtype bf16");
  const std::string missing =
      test::thrown_message([&] { load_hf_weights(llama, layout, weights, WeightSource::model, "test"); });
  EXPECT_NE(missing.find("model.layers.0.self_attn.k_proj.bias"), std::string::npos) << missing;

  const std::string sliding = make_hf_llama_folder(dir.str() + "/sliding", "--dtype bf16 --qwen2 --break sliding");
  const std::string error = test::thrown_message([&] { read_hf_config(sliding); });
  EXPECT_NE(error.find("use_sliding_window = true: stepgraph's attention is fully causal"), std::string::npos) << error;
}

// A Llama folder with attention_bias and mlp_bias: a bias on q, k, v, o_proj, gate_proj, up_proj and down_proj, read
// into a model with add_bias_linear (values as the folder holds them); its config.json round-trips. A model with the
// QKV bias alone cannot load its other biases, and a folder with one of the two keys is refused, naming the other.
TEST(HfImport, LlamaFolderWithBiasesLoadsThemAll) {
  test::ScratchDir dir("hf_import_llama_bias");
  const std::string folder = make_hf_llama_folder(dir.str() + "/biases", "--dtype bf16 --bias-linear");
  const HfModelConfig config = read_hf_config(folder);
  EXPECT_EQ(config.architecture, "LlamaForCausalLM");
  const model::ModelSpec& s = config.spec;
  EXPECT_TRUE(s.add_bias_linear);
  EXPECT_FALSE(s.add_qkv_bias);
  EXPECT_EQ(model::hf_architecture(s), "LlamaForCausalLM");
  const model::ModelLayout layout = model::model_layout(s);
  std::vector<float> weights;
  const int biases = load_folder_with_biases(folder, layout, weights);
  EXPECT_EQ(biases, 14);  // q, k, v, o, gate, up and down of 2 layers

  const std::string written = dir.str() + "/written";
  std::filesystem::create_directories(written);
  std::ofstream(written + "/config.json") << hf_model_config(s, "bfloat16").dump(2);
  const HfModelConfig back = read_hf_config(written);
  EXPECT_EQ(back.architecture, "LlamaForCausalLM");
  EXPECT_TRUE(back.spec.add_bias_linear);

  model::ModelSpec qkv_only = s;
  qkv_only.add_bias_linear = false;
  qkv_only.add_qkv_bias = true;
  const std::string extra = test::thrown_message(
      [&] { load_hf_weights(folder, model::model_layout(qkv_only), weights, WeightSource::model, "test"); });
  EXPECT_NE(extra.find("model.layers.0.mlp.down_proj.bias"), std::string::npos) << extra;

  nlohmann::json mlp_only = nlohmann::json::parse(std::ifstream(folder + "/config.json"));
  mlp_only["attention_bias"] = false;
  std::ofstream(written + "/config.json") << mlp_only.dump(2);
  const std::string error = test::thrown_message([&] { read_hf_config(written); });
  EXPECT_NE(error.find("mlp_bias = true without attention_bias"), std::string::npos) << error;
  EXPECT_NE(error.find("model.add_bias_linear"), std::string::npos) << error;
}

// A Qwen2-MoE folder: the Qwen MoE names, a gated shared expert in each MoE block (shared_expert.* and
// shared_expert_gate.weight [1, H]), q, k and v biases (qkv_bias), top-k not renormalised (norm_topk_prob false:
// Megatron's pre-softmax), block 1 dense. Its weights load as they are and its config.json round-trips; without
// qkv_bias the attention has no biases; a shared_expert_intermediate_size of 0 is refused (Qwen2-MoE's blocks always
// have the shared expert).
TEST(HfImport, Qwen2MoeFolderLoadsItsGatedSharedExpert) {
  test::ScratchDir dir("hf_import_qwen2_moe");
  const std::string folder =
      make_hf_llama_folder(dir.str() + "/qwen2_moe",
                           "--dtype bf16 --qwen2 --experts 4 --topk 2 --moe-ffn 16 --shared-ffn 24 "
                           "--mlp-only 1");
  const HfModelConfig config = read_hf_config(folder);
  EXPECT_EQ(config.architecture, "Qwen2MoeForCausalLM");
  const model::ModelSpec& s = config.spec;
  EXPECT_FALSE(s.qk_layernorm);
  EXPECT_TRUE(s.add_qkv_bias);
  EXPECT_EQ(s.num_moe_experts, 4);
  EXPECT_EQ(s.moe_router_topk, 2);
  EXPECT_EQ(s.moe_ffn_hidden_size, 16);
  EXPECT_EQ(s.moe.shared_expert_intermediate_size, 24);
  EXPECT_TRUE(s.moe.shared_expert_gate);
  EXPECT_TRUE(s.moe.pre_softmax);
  EXPECT_EQ(s.moe.layer_freq, (std::vector<int>{1, 0}));
  EXPECT_EQ(model::hf_architecture(s), "Qwen2MoeForCausalLM");
  const model::ModelLayout layout = model::model_layout(s);
  EXPECT_EQ(layout.find("model.layers.0.mlp.shared_expert_gate.weight").numel, s.hidden_size);
  EXPECT_NE(layout.find("model.layers.0.mlp.shared_expert.gate_proj.weight").numel, 0);
  std::vector<float> weights;
  EXPECT_EQ(load_folder_with_biases(folder, layout, weights), 6);  // q, k and v of 2 layers

  const std::string written = dir.str() + "/written";
  std::filesystem::create_directories(written);
  nlohmann::json json = hf_model_config(s, "bfloat16");
  EXPECT_EQ(json["model_type"], "qwen2_moe");
  EXPECT_EQ(json["shared_expert_intermediate_size"], 24);
  EXPECT_EQ(json["qkv_bias"], true);
  EXPECT_EQ(json["norm_topk_prob"], false);
  EXPECT_EQ(json["mlp_only_layers"], nlohmann::json::array({1}));
  EXPECT_FALSE(json.contains("attention_bias"));
  std::ofstream(written + "/config.json") << json.dump(2);
  const HfModelConfig back = read_hf_config(written);
  EXPECT_EQ(back.architecture, "Qwen2MoeForCausalLM");
  EXPECT_EQ(back.spec.moe.shared_expert_intermediate_size, 24);
  EXPECT_EQ(back.spec.moe.layer_freq, s.moe.layer_freq);

  json["qkv_bias"] = false;
  std::ofstream(written + "/config.json") << json.dump(2);
  EXPECT_FALSE(read_hf_config(written).spec.add_qkv_bias);
  json["mlp_only_layers"] = {0, 1};
  std::ofstream(written + "/config.json") << json.dump(2);
  const std::string dense = test::thrown_message([&] { read_hf_config(written); });
  EXPECT_NE(dense.find("leave no MoE block: that is a dense Qwen2 (model_type qwen2)"), std::string::npos) << dense;
  json["mlp_only_layers"] = {1};
  json["shared_expert_intermediate_size"] = 0;
  std::ofstream(written + "/config.json") << json.dump(2);
  const std::string error = test::thrown_message([&] { read_hf_config(written); });
  EXPECT_NE(error.find("shared_expert_intermediate_size = 0: expected a positive integer"), std::string::npos) << error;
}

// A Qwen3-MoE folder: experts in the blocks mlp_only_layers does not list (a dense MLP there), norm_topk_prob's
// routing; its weights load under the layout's Qwen3-MoE names and its config.json round-trips.
TEST(HfImport, Qwen3MoeFolderLoadsItsExpertsAndDenseBlocks) {
  test::ScratchDir dir("hf_import_qwen3_moe");
  const std::string folder = make_hf_llama_folder(dir.str() + "/qwen3_moe",
                                                  "--dtype bf16 --qwen3 --experts 4 --topk 2 "
                                                  "--moe-ffn 16 --mlp-only 1 --norm-topk");
  const HfModelConfig config = read_hf_config(folder);
  EXPECT_EQ(config.architecture, "Qwen3MoeForCausalLM");
  const model::ModelSpec& s = config.spec;
  EXPECT_TRUE(s.qk_layernorm);
  EXPECT_EQ(s.num_moe_experts, 4);
  EXPECT_EQ(s.moe_router_topk, 2);
  EXPECT_EQ(s.moe_ffn_hidden_size, 16);
  EXPECT_EQ(s.ffn_hidden_size, 48);
  EXPECT_FALSE(s.moe.pre_softmax);  // norm_topk_prob: the top-k renormalised
  EXPECT_EQ(s.moe.layer_freq, (std::vector<int>{1, 0}));
  EXPECT_EQ(model::hf_architecture(s), "Qwen3MoeForCausalLM");
  const model::ModelLayout layout = model::model_layout(s);
  EXPECT_NE(layout.find("model.layers.0.mlp.experts.3.gate_proj.weight").numel, 0);
  std::vector<float> weights;
  load_hf_weights(folder, layout, weights, WeightSource::model, "test");
  expect_weights_equal_expected(folder, layout, weights);

  const std::string written = dir.str() + "/written";
  std::filesystem::create_directories(written);
  const nlohmann::json json = hf_model_config(s, "bfloat16");
  EXPECT_EQ(json["mlp_only_layers"], nlohmann::json::array({1}));
  EXPECT_EQ(json["norm_topk_prob"], true);
  std::ofstream(written + "/config.json") << json.dump(2);
  const model::ModelSpec back = read_hf_config(written).spec;
  EXPECT_EQ(back.moe.layer_freq, s.moe.layer_freq);
  EXPECT_EQ(back.moe.pre_softmax, s.moe.pre_softmax);
  EXPECT_EQ(back.num_moe_experts, s.num_moe_experts);
  EXPECT_EQ(back.moe_ffn_hidden_size, s.moe_ffn_hidden_size);

  // A dense-only list names the key.
  nlohmann::json dense = json;
  dense["mlp_only_layers"] = {0, 1};
  std::ofstream(written + "/config.json") << dense.dump(2);
  const std::string error = test::thrown_message([&] { read_hf_config(written); });
  EXPECT_NE(error.find("mlp_only_layers and decoder_sparse_step leave no MoE block"), std::string::npos) << error;
  dense["mlp_only_layers"] = {2};
  std::ofstream(written + "/config.json") << dense.dump(2);
  const std::string range = test::thrown_message([&] { read_hf_config(written); });
  EXPECT_NE(range.find("mlp_only_layers lists 2: not a layer index below num_hidden_layers = 2"), std::string::npos)
      << range;
}

// Every half-precision value widens exactly: compared with sign x significand x 2^exponent in double.
TEST(HfImport, F16WidensExactly) {
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    const uint16_t h = static_cast<uint16_t>(bits);
    const int exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
    const double sign = (h & 0x8000) != 0 ? -1.0 : 1.0;
    const float got = f16_bits_to_float(h);
    if (exponent == 0x1f) {
      if (mantissa == 0) {
        ASSERT_EQ(got, static_cast<float>(sign * INFINITY)) << std::hex << bits;
      } else {
        ASSERT_TRUE(std::isnan(got)) << std::hex << bits;
      }
      continue;
    }
    const double want = exponent == 0 ? sign * std::ldexp(mantissa, -24)  // zero and subnormals
                                      : sign * std::ldexp(1024 + mantissa, exponent - 25);
    ASSERT_EQ(static_cast<double>(got), want) << std::hex << bits;
    ASSERT_EQ(std::signbit(got), (h & 0x8000) != 0) << std::hex << bits;  // -0 stays -0
  }
}

TEST(HfImport, RefusesBrokenFoldersNamingTheProblem) {
  test::ScratchDir dir("hf_import_bad");
  struct WeightDefect {
    const char* name;
    const char* args;
    std::vector<std::string> messages;
  };
  const WeightDefect weight_defects[] = {
      {"missing", "--shards 2 --break missing", {"missing    model.layers.0.mlp.up_proj.weight"}},
      {"extra", "--shards 2 --break extra", {"unexpected model.layers.0.self_attn.q_proj.bias"}},
      {"shape", "--shards 2 --break shape", {"different  model.norm.weight: checkpoint [33], expected [32]"}},
      {"nan",
       "--shards 2 --break nan",
       {"test ", "holds non-finite values: tensor model.layers.1.mlp.down_proj.weight element 7 is nan (1 non-finite"}},
      {"inf_fp16",
       "--dtype fp16 --break inf",
       {"model.safetensors holds non-finite values: tensor model.norm.weight element 7 is inf (2 non-finite"}},
      {"f64",
       "--dtype fp32 --break f64",
       {"2 tensors are in a dtype stepgraph cannot read", "\n  model.layers.0.input_layernorm.weight (F64)",
        "\n  model.norm.weight (F64)", "F32, BF16 or F16"}},
      {"stale",
       "--shards 2 --break stale",
       {"holds both model.safetensors and model.safetensors.index.json", "transformers loads model.safetensors",
        "Remove the one not meant"}},
      {"shard_missing",
       "--shards 2 --break shard_missing",
       {"model.safetensors.index.json lists 1 shard missing from", "model-00002-of-00002.safetensors (10 tensors"}},
      {"shard_outside",
       "--shards 2 --break shard_outside",
       {"model.embed_tokens.weight -> \"../model-00001-of-00002.safetensors\"", "shard names are file names"}},
      {"index_moved",
       "--shards 3 --break index_moved",
       {"model.safetensors.index.json does not match its shards",
        "model.embed_tokens.weight: the index maps it to model-00002-of-00003.safetensors, but it is in "
        "model-00001-of-00003.safetensors"}},
      {"index_ghost",
       "--shards 2 --break index_ghost",
       {"in no shard       model.layers.9.mlp.up_proj.weight: the index maps it to model-00001-of-00002"}},
      {"index_unlisted",
       "--shards 2 --break index_unlisted",
       {"not in the index  model.layers.0.self_attn.q_proj.weight: in model-00002-of-00002.safetensors"}},
  };
  for (const WeightDefect& d : weight_defects) {
    SCOPED_TRACE(d.name);
    const std::string folder = make_hf_llama_folder(dir.str() + "/" + d.name, d.args);
    const model::ModelLayout layout = model::model_layout(read_hf_config(folder).spec);
    std::vector<float> weights = {1.0f};
    const std::string error =
        test::thrown_message([&] { load_hf_weights(folder, layout, weights, WeightSource::model, "test"); });
    for (const std::string& message : d.messages) EXPECT_NE(error.find(message), std::string::npos) << error;
    EXPECT_EQ(weights, std::vector<float>{1.0f}) << "nothing is copied from a refused folder";
  }
  const std::pair<const char*, const char*> config_defects[] = {
      {"bias",
       "attention_bias = true without mlp_bias: stepgraph's linear biases are Megatron's "
       "model.add_bias_linear"},
      {"act", "hidden_act = \"gelu\""},
      {"yarn", "rope_scaling.rope_type = \"yarn\""},
  };
  for (const auto& [defect, message] : config_defects) {
    const std::string folder = make_hf_llama_folder(dir.str() + "/" + defect, std::string("--break ") + defect);
    const std::string error = test::thrown_message([&] { read_hf_config(folder); });
    EXPECT_NE(error.find(message), std::string::npos) << error;
    EXPECT_NE(error.find("config.json"), std::string::npos) << error;
  }
  // A head_dim other than hidden_size / num_attention_heads is Megatron's kv_channels (here 16 with hidden 32 and 4
  // heads); this folder's weights are shaped for 8, which the weight check names.
  {
    const std::string folder = make_hf_llama_folder(dir.str() + "/head_dim", "--break head_dim");
    const HfModelConfig config = read_hf_config(folder);
    EXPECT_EQ(config.spec.kv_channels, 16);
    std::vector<float> weights;
    const std::string error = test::thrown_message(
        [&] { load_hf_weights(folder, model::model_layout(config.spec), weights, WeightSource::model, "test"); });
    EXPECT_NE(error.find("different  model.layers.0.self_attn.q_proj.weight: checkpoint [32, 32], expected [64, 32]"),
              std::string::npos)
        << error;
  }
  // Values no model has are refused by read_hf_config naming config.json and the key, not by the model's own
  // checks with a source line.
  const std::string good = make_hf_llama_folder(dir.str() + "/good", "");
  struct ValueDefect {
    const char* key;
    nlohmann::json value;  // null: the key removed
    const char* message;
  };
  const ValueDefect value_defects[] = {
      {"rms_norm_eps", 0, "rms_norm_eps = 0: must be positive"},
      {"rms_norm_eps", -1e-5, "rms_norm_eps = -1e-05: must be positive"},
      {"num_key_value_heads", 3, "num_key_value_heads = 3 does not divide num_attention_heads = 4"},
      {"num_key_value_heads", 8, "num_key_value_heads = 8 does not divide num_attention_heads = 4"},
      {"initializer_range", 0, "initializer_range = 0: must be positive"},
      {"hidden_size", 36, "hidden_size / num_attention_heads = 36 / 4 = 9: RoPE needs an even head dimension"},
      {"head_dim", 9, "head_dim = 9: RoPE needs an even head dimension"},
      {"num_hidden_layers", 0, "num_hidden_layers = 0: expected a positive integer"},
      {"intermediate_size", -48, "intermediate_size = -48: expected a positive integer"},
      {"vocab_size", 4294967296LL, "vocab_size = 4294967296: token ids are 32-bit"},
      {"model_type", nullptr,
       "model_type is missing: transformers needs it to pick the model class; add "
       "\"model_type\": \"llama\""},
      {"model_type", "gemma",
       "model_type = \"gemma\": checkpoint.pretrained_checkpoint takes Llama (model_type \"llama\"), Mistral "
       "(\"mistral\"), Phi-3 (\"phi3\"), Qwen2 (\"qwen2\", \"qwen2_moe\"), Qwen3 (\"qwen3\", \"qwen3_moe\"), Mixtral "
       "(\"mixtral\") and NemotronH (\"nemotron_h\") folders, as does generate"},
  };
  for (const ValueDefect& d : value_defects) {
    SCOPED_TRACE(std::string(d.key) + " = " + d.value.dump());
    const std::string folder = dir.str() + "/value_" + d.key;
    std::filesystem::remove_all(folder);
    std::filesystem::copy(good, folder);
    nlohmann::json config = nlohmann::json::parse(std::ifstream(folder + "/config.json"));
    if (d.value.is_null()) {
      config.erase(d.key);
    } else {
      config[d.key] = d.value;
    }
    std::ofstream(folder + "/config.json") << config.dump(2);
    const std::string error = test::thrown_message([&] { read_hf_config(folder); });
    EXPECT_NE(error.find(folder + "/config.json: " + d.message), std::string::npos) << error;
    EXPECT_EQ(error.find(".cpp:"), std::string::npos) << "no source line: " << error;
  }

  EXPECT_NE(test::thrown_message([&] {
              resolve_model_folder(dir.str() + "/nope", "generate CHECKPOINT");
            }).find("generate CHECKPOINT"),
            std::string::npos);
  // A relative path says what it was resolved against (the working directory, also for a path from a YAML file).
  const std::string relative = test::thrown_message([&] { resolve_model_folder("no_such_model_dir", "load"); });
  EXPECT_NE(relative.find("load no_such_model_dir (relative to the working directory " +
                          std::filesystem::current_path().string() + "): no such directory"),
            std::string::npos)
      << relative;
  const std::string checkpoint = test::thrown_message([&] { find_checkpoint_folder("no_such_ck", "checkpoint.load"); });
  EXPECT_NE(checkpoint.find("checkpoint.load no_such_ck (relative to the working directory"), std::string::npos)
      << checkpoint;
  std::filesystem::create_directories(dir.str() + "/empty");
  EXPECT_NE(test::thrown_message([&] { resolve_model_folder(dir.str() + "/empty", "x"); }).find("no config.json"),
            std::string::npos);
  // A file is not a folder (not "no such directory").
  const std::string error = test::thrown_message([&] { resolve_model_folder(good + "/config.json", "generate X"); });
  EXPECT_NE(error.find("generate X " + good + "/config.json: not a directory"), std::string::npos) << error;
}

// Found by tests/fuzz (the JSON readers): a number past double's range made nlohmann::json::parse throw
// out_of_range, not parse_error, which escaped as a foreign exception instead of naming the index.
TEST(HfImport, AnIndexNumberPastDoubleIsNotValidJson) {
  test::ScratchDir dir("hf_import_index_overflow");
  const std::string index = dir.str() + "/model.safetensors.index.json";
  std::ofstream(index) << R"({"metadata": {"total_size": 1e999}, "weight_map": {"w": "a.safetensors"}})";
  const std::string error = test::thrown_message([&] { weight_files(dir.str(), WeightSource::model); });
  EXPECT_NE(error.find(index + " is not valid JSON"), std::string::npos) << error;
}

}  // namespace
}  // namespace sg::checkpoint
