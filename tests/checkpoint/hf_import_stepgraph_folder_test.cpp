// A stepgraph checkpoint folder loads as a Hugging Face one does (checkpoint/hf_import.h): its fp32 main weights for
// training, its model weights for generation, verified against train_state.json's CRC-32s as checkpoint.load
// verifies it.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "checkpoint/checkpoint_dir.h"
#include "checkpoint/hf_config.h"
#include "checkpoint/hf_import.h"
#include "checkpoint_test_util.h"
#include "model/layer_registry.h"
#include "model/stack.h"
#include "test_util.h"

namespace sg::checkpoint {
namespace {

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
  EXPECT_NE(load_hf_weights(folder, layout, weights, WeightSource::main_params, "test").find("optimizer_main_params"),
            std::string::npos);
  const auto& q = layout.find("model.layers.1.self_attn.q_proj.weight");
  EXPECT_EQ(weights[q.offset + 5], test::pattern_value(q.name, 5) + 0.125f);
  EXPECT_NE(load_hf_weights(folder, layout, weights, WeightSource::model, "test").find("model.safetensors (BF16)"),
            std::string::npos);
  EXPECT_EQ(weights[q.offset + 5], test::pattern_value(q.name, 5));
}

// A stepgraph checkpoint saved with `model_config` (null: no config.json) and main weights + salt at `iteration`.
std::string save_own(const std::string& dir, int64_t iteration, const nlohmann::json& model_config, float salt = 0.125f,
                     bool nan = false) {
  const auto spec = test::tiny_llama_spec(false);
  const auto model_tensors = test::tiny_llama_tensors(spec, TensorDtype::BF16, 0.0f);
  auto main = test::tiny_llama_tensors(spec, TensorDtype::F32, salt);
  if (nan) {  // element 3 of the second tensor
    const float v = NAN;
    std::memcpy(main.bytes[1].data() + 12, &v, 4);
  }
  TrainingCheckpoint c;
  c.model = model_tensors.refs();
  c.model_config = model_config;
  c.main_params = main.refs();
  c.exp_avg = main.refs();
  c.exp_avg_sq = main.refs();
  c.state.iteration = iteration;
  return save_checkpoint(dir, iteration, training_checkpoint_contents(c));
}

void flip_bit(const std::string& path, uint64_t byte_from_end) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(-static_cast<std::streamoff>(byte_from_end), std::ios::end);
  char b = 0;
  f.read(&b, 1);
  b = static_cast<char>(b ^ 0x40);  // one bit of the last tensor's data
  f.seekp(-static_cast<std::streamoff>(byte_from_end), std::ios::end);
  f.write(&b, 1);
}

// pretrained_checkpoint and generate verify a stepgraph checkpoint as checkpoint.load does: the CRC-32s recorded in
// train_state.json (the files they read, and config.json / the tokenizer's), and finite values; the messages name
// the key or argument that named the folder, and its earlier iteration.
TEST(HfImport, StepgraphCheckpointIsVerifiedLikeCheckpointLoad) {
  test::ScratchDir dir("hf_import_verify");
  const auto spec = test::tiny_llama_spec(false);
  const nlohmann::json llama = hf_llama_config(spec, "bfloat16");
  save_own(dir.str(), 6, llama);
  const std::string folder = save_own(dir.str(), 7, llama);
  const std::string previous = dir.str() + "/iter_0000006";
  const model::ModelLayout layout = model::model_layout(read_hf_config(folder).spec);
  std::vector<float> weights = {1.0f};

  // A bit flip in model.safetensors: generation (which reads it) refuses; training (fp32 main weights) does not
  // read it.
  flip_bit(folder + "/model.safetensors", 2);
  std::string error = test::thrown_message(
      [&] { load_hf_weights(folder, layout, weights, WeightSource::model, "generate CHECKPOINT"); });
  EXPECT_NE(error.find("checkpoint file " + folder + "/model.safetensors is corrupt"), std::string::npos) << error;
  EXPECT_NE(error.find("set generate CHECKPOINT to " + previous), std::string::npos) << error;
  EXPECT_EQ(weights, std::vector<float>{1.0f});
  EXPECT_NE(load_hf_weights(folder, layout, weights, WeightSource::main_params, "checkpoint.pretrained_checkpoint")
                .find("optimizer_main_params"),
            std::string::npos);
  flip_bit(folder + "/optimizer_main_params.safetensors", 2);
  error = test::thrown_message(
      [&] { load_hf_weights(folder, layout, weights, WeightSource::main_params, "checkpoint.pretrained_checkpoint"); });
  EXPECT_NE(error.find(folder + "/optimizer_main_params.safetensors is corrupt"), std::string::npos) << error;
  EXPECT_NE(error.find("set checkpoint.pretrained_checkpoint to " + previous), std::string::npos) << error;

  // config.json is verified before it is read (a changed value would otherwise be reported as a shape mismatch).
  std::ofstream(previous + "/config.json", std::ios::app) << " ";
  error = test::thrown_message([&] { resolve_model_folder(previous, "checkpoint.pretrained_checkpoint"); });
  EXPECT_NE(error.find(previous + "/config.json is corrupt"), std::string::npos) << error;

  // A recorded file that is missing is named as such (not "convert a pytorch_model.bin").
  const std::string incomplete = save_own(dir.str() + "/incomplete", 3, llama);
  std::filesystem::remove(incomplete + "/model.safetensors");
  error =
      test::thrown_message([&] { load_hf_weights(incomplete, layout, weights, WeightSource::model, "generate X"); });
  EXPECT_NE(error.find(incomplete + "/model.safetensors is missing, but train_state.json recorded it"),
            std::string::npos)
      << error;
  EXPECT_EQ(error.find("pytorch_model.bin"), std::string::npos) << error;

  // Non-finite values (their CRC-32 is right: written so) are refused naming the tensor and element.
  const std::string nan = save_own(dir.str() + "/nan", 2, llama, 0.125f, /*nan=*/true);
  weights = {1.0f};
  error = test::thrown_message(
      [&] { load_hf_weights(nan, layout, weights, WeightSource::main_params, "checkpoint.pretrained_checkpoint"); });
  EXPECT_NE(error.find("optimizer_main_params.safetensors holds non-finite values: tensor " +
                       test::hf_llama_shapes(spec)[1].first + " element 3 is nan"),
            std::string::npos)
      << error;
  EXPECT_EQ(weights, std::vector<float>{1.0f});

  // Another model type: the refusal says what these paths take. A Mixtral folder is read (its experts).
  nlohmann::json qwen = llama;
  qwen["model_type"] = "qwen3_next";
  error = test::thrown_message([&] { read_hf_config(save_own(dir.str() + "/qwen", 1, qwen)); });
  EXPECT_NE(error.find("model_type = \"qwen3_next\": checkpoint.pretrained_checkpoint takes Llama (model_type "
                       "\"llama\"), Mistral (\"mistral\"), Phi-3 (\"phi3\"), Qwen2 (\"qwen2\", \"qwen2_moe\"), "
                       "Qwen3 (\"qwen3\", \"qwen3_moe\"), Mixtral (\"mixtral\") and NemotronH (\"nemotron_h\") "
                       "folders"),
            std::string::npos)
      << error;
  nlohmann::json mixtral = llama;
  mixtral["model_type"] = "mixtral";
  mixtral["num_local_experts"] = 4;
  const HfModelConfig moe = read_hf_config(save_own(dir.str() + "/moe", 1, mixtral));
  EXPECT_EQ(moe.architecture, "MixtralForCausalLM");
  EXPECT_EQ(moe.spec.num_moe_experts, 4);
  EXPECT_EQ(moe.spec.moe_router_topk, 2);  // transformers' default
  EXPECT_EQ(moe.spec.moe_ffn_hidden_size, moe.spec.ffn_hidden_size);
  // Keys left out take the model class's defaults: MixtralConfig's for a Mixtral, not LlamaConfig's.
  struct Defaults {
    const nlohmann::json& config;
    const char* name;
    double rope_theta;
    int64_t max_positions;
    int64_t key_value_heads;  // of 16 heads
    double rms_norm_eps;
  };
  for (const Defaults& d :
       {Defaults{mixtral, "bare_mixtral", 1e6, 131072, 8, 1e-5}, Defaults{llama, "bare_llama", 1e4, 2048, 16, 1e-6}}) {
    nlohmann::json bare = d.config;
    for (const char* key : {"rope_theta", "max_position_embeddings", "num_key_value_heads", "rms_norm_eps"}) {
      bare.erase(key);
    }
    bare["num_attention_heads"] = 16;
    const HfModelConfig read = read_hf_config(save_own(dir.str() + "/" + d.name, 1, bare));
    EXPECT_EQ(read.spec.rotary_base, d.rope_theta) << d.name;
    EXPECT_EQ(read.max_position_embeddings, d.max_positions) << d.name;
    EXPECT_EQ(read.spec.num_query_groups, d.key_value_heads) << d.name;
    EXPECT_EQ(read.spec.layernorm_epsilon, d.rms_norm_eps) << d.name;
  }
  mixtral["sliding_window"] = 4096;
  error = test::thrown_message([&] { read_hf_config(save_own(dir.str() + "/window", 1, mixtral)); });
  EXPECT_NE(error.find("sliding_window = 4096: stepgraph's attention is fully causal"), std::string::npos) << error;
  save_own(dir.str() + "/no_class", 1, nullptr);
  error = test::thrown_message([&] { resolve_model_folder(dir.str() + "/no_class", "generate CHECKPOINT"); });
  EXPECT_NE(error.find("a stepgraph checkpoint without config.json"), std::string::npos) << error;
  EXPECT_NE(error.find("checkpoint.load=" + dir.str() + "/no_class"), std::string::npos) << error;

  // Path messages name the argument and what is there.
  std::filesystem::create_directories(dir.str() + "/no_latest");
  std::filesystem::rename(incomplete, dir.str() + "/no_latest/iter_0000003");
  error = test::thrown_message([&] { resolve_model_folder(dir.str() + "/no_latest", "generate CHECKPOINT"); });
  EXPECT_NE(error.find("it holds iter_0000003 but no latest_checkpointed_iteration.txt"), std::string::npos) << error;
  EXPECT_NE(error.find("e.g. " + dir.str() + "/no_latest/iter_0000003"), std::string::npos) << error;
  std::ofstream(dir.str() + "/moe/latest_checkpointed_iteration.txt") << "5\n";
  error = test::thrown_message([&] { resolve_model_folder(dir.str() + "/moe", "checkpoint.pretrained_checkpoint"); });
  EXPECT_EQ(error.rfind("checkpoint.pretrained_checkpoint " + dir.str() +
                            "/moe: latest_checkpointed_iteration.txt "
                            "names iteration 5",
                        0),
            0u)
      << error;
  EXPECT_EQ(error.find("checkpoint.load"), std::string::npos) << error;
}

}  // namespace
}  // namespace sg::checkpoint
