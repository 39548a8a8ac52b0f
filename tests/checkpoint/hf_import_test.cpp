// Loading Hugging Face Llama folders (checkpoint/hf_import.h). The folders are written by
// tests/checkpoint/make_hf_llama.py with numpy + safetensors (scripts/setup.sh installs both; without
// them this FAILS): one file or shards with model.safetensors.index.json, BF16 or F32, tied or
// untied, Llama 3 rope_scaling in the transformers 4 and 5 spellings. Every loaded tensor must equal
// the script's expected.safetensors element for element; each broken folder must be refused naming
// the tensor or the config.json key. A stepgraph checkpoint folder loads the same way (its fp32 main
// weights for training, its model weights for generation).
#include "checkpoint/hf_import.h"
#include "model/layer_registry.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>

#include "checkpoint/checkpoint_dir.h"
#include "checkpoint/hf_config.h"
#include "checkpoint/safetensors.h"
#include "checkpoint_test_util.h"
#include "process_util.h"
#include "test_util.h"

namespace sg::checkpoint {
namespace {

std::string make_folder(const std::string& dir, const std::string& args) {
  const auto r =
      test::run_command("python3 " + std::string(STEPGRAPH_SOURCE_DIR) + "/tests/checkpoint/make_hf_llama.py --out " +
                        test::shell_quote(dir) + " " + args + " 2>&1");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return dir;
}

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
      {"fp32_transformers5_rope_parameters",
       "--dtype fp32 --tied --rope-scaling 32 --rope-parameters --rope-theta 500000", true, 32.0,
       "model.safetensors (F32)"},
  };
  for (const Variant& v : variants) {
    SCOPED_TRACE(v.name);
    const std::string folder = make_folder(dir.str() + "/" + v.name, v.args);
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
    const std::string what = load_hf_weights(folder, layout, weights, WeightSource::model);
    EXPECT_NE(what.find(v.expect_files), std::string::npos) << what;
    expect_weights_equal_expected(folder, layout, weights);
  }
  EXPECT_EQ(read_hf_config(dir.str() + "/bf16_two_shards_llama3").eos_token_ids, (std::vector<int64_t>{5}));
}

TEST(HfImport, RefusesBrokenFoldersNamingTheProblem) {
  test::ScratchDir dir("hf_import_bad");
  const std::pair<const char*, const char*> weight_defects[] = {
      {"missing", "missing    model.layers.0.mlp.up_proj.weight"},
      {"extra", "unexpected model.layers.0.self_attn.q_proj.bias"},
      {"shape", "different  model.norm.weight: checkpoint [33], expected [32]"},
  };
  for (const auto& [defect, message] : weight_defects) {
    const std::string folder = make_folder(dir.str() + "/" + defect, std::string("--shards 2 --break ") + defect);
    const model::ModelLayout layout = model::model_layout(read_hf_config(folder).spec);
    std::vector<float> weights = {1.0f};
    const std::string error =
        test::thrown_message([&] { load_hf_weights(folder, layout, weights, WeightSource::model); });
    EXPECT_NE(error.find(message), std::string::npos) << error;
    EXPECT_EQ(weights, std::vector<float>{1.0f}) << "nothing is copied from a refused folder";
  }
  const std::pair<const char*, const char*> config_defects[] = {
      {"bias", "attention_bias = true"},
      {"act", "hidden_act = \"gelu\""},
      {"yarn", "rope_scaling.rope_type = \"yarn\""},
      {"head_dim", "head_dim = 16"},
  };
  for (const auto& [defect, message] : config_defects) {
    const std::string folder = make_folder(dir.str() + "/" + defect, std::string("--break ") + defect);
    const std::string error = test::thrown_message([&] { read_hf_config(folder); });
    EXPECT_NE(error.find(message), std::string::npos) << error;
    EXPECT_NE(error.find("config.json"), std::string::npos) << error;
  }
  EXPECT_NE(test::thrown_message([&] {
              resolve_model_folder(dir.str() + "/nope", "generate CHECKPOINT");
            }).find("generate CHECKPOINT"),
            std::string::npos);
  std::filesystem::create_directories(dir.str() + "/empty");
  EXPECT_NE(test::thrown_message([&] { resolve_model_folder(dir.str() + "/empty", "x"); }).find("no config.json"),
            std::string::npos);
}

TEST(HfImport, StepgraphCheckpointFolderLoadsTheSameWay) {
  test::ScratchDir dir("hf_import_own");
  const auto spec = test::tiny_llama_spec(false);
  const auto model_tensors = test::tiny_llama_tensors(spec, TensorDtype::BF16, 0.0f);
  const auto main = test::tiny_llama_tensors(spec, TensorDtype::F32, 0.125f);
  TrainingCheckpoint c;
  c.model = model_tensors.refs();
  c.model_config = hf_llama_config(spec, "bfloat16");
  c.main_params = main.refs();
  c.exp_avg = main.refs();
  c.exp_avg_sq = main.refs();
  c.state.iteration = 7;
  save_checkpoint(dir.str(), 7, training_checkpoint_contents(c));

  const std::string folder = resolve_model_folder(dir.str(), "checkpoint.pretrained_checkpoint");
  EXPECT_EQ(folder, dir.str() + "/iter_0000007");
  const model::ModelLayout layout = model::model_layout(read_hf_config(folder).spec);
  std::vector<float> weights;
  EXPECT_NE(load_hf_weights(folder, layout, weights, WeightSource::main_params).find("optimizer_main_params"),
            std::string::npos);
  const auto& q = layout.find("model.layers.1.self_attn.q_proj.weight");
  EXPECT_EQ(weights[q.offset + 5], test::pattern_value(q.name, 5) + 0.125f);
  EXPECT_NE(load_hf_weights(folder, layout, weights, WeightSource::model).find("model.safetensors (BF16)"),
            std::string::npos);
  EXPECT_EQ(weights[q.offset + 5], test::pattern_value(q.name, 5));
}

}  // namespace
}  // namespace sg::checkpoint
