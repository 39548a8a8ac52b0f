// checkpoint.pretrained_checkpoint on the CPU backend, in process:
//   * a Hugging Face folder (tests/checkpoint/make_hf_llama.py) with the recipe's shape keys unset: the
//     shapes come from its config.json and step 1's loss equals the loss the CPU model computes with
//     the folder's weights on the batch that step saw (so the weights, not an init, were trained);
//   * a stepgraph checkpoint folder the same way (its fp32 main weights), at step 0 with a fresh
//     optimizer;
//   * set shape keys that disagree are refused, each (key, folder value, configured value) listed
//     with the override that fixes it;
//   * so is a model the folder's weights do not describe beyond the sizes (no RoPE, another MLP activation,
//     another head dim), and a folder's Llama 3 RoPE scaling lists only the keys that really differ;
//   * a NemotronH folder whose routers' bias is not zero is refused for a run without the expert bias;
//   * a checkpoint trained with model.kv_channels (head_dim != hidden / heads) starts a run, its head dim taken;
//   * a Qwen3 folder trains with model.qk_layernorm, and only with it;
//   * an empty value is refused by validation as empty, not as a missing folder;
//   * checkpoint.load wins when it holds a checkpoint (resume), pretrained_checkpoint otherwise;
//   * an MoE checkpoint with the experts' biases (no config.json) resumes exactly and is refused as pretrained.
#include "train/pretrained.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>

#include "checkpoint/hf_import.h"
#include "checkpoint/safetensors.h"
#include "config/model_config.h"
#include "config/validate.h"
#include "model/cpu_model.h"
#include "process_util.h"
#include "test_util.h"
#include "train/backend_factory.h"
#include "train/trainer.h"

namespace sg {
namespace {

namespace fs = std::filesystem;

struct Scratch {
  fs::path path = fs::temp_directory_path() / ("sg_pretrained_" + std::to_string(::getpid()));
  Scratch() {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~Scratch() { fs::remove_all(path); }
  std::string operator/(const std::string& name) const { return (path / name).string(); }
};

std::string make_hf_folder(const std::string& dir, const std::string& options = "") {
  const auto r = test::run_command("python3 " + std::string(STEPGRAPH_SOURCE_DIR) +
                                   "/tests/checkpoint/make_hf_llama.py --dtype bf16 --shards 2 --std 0.05 " + options +
                                   " --out " + test::shell_quote(dir) + " 2>&1");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return dir;
}

// llama/tiny on mock data, 16-token sequences, 2 per step; the shape keys unset unless `overrides` set them.
config::Config tiny_config(const std::vector<std::string>& overrides) {
  std::vector<std::string> all = {
      "model.num_layers=0",          "model.hidden_size=0",        "model.num_attention_heads=0",
      "model.num_query_groups=null", "model.ffn_hidden_size=null", "model.vocab_size=null",
      "model.seq_length=16",         "dataset.seq_length=16",      "train.micro_batch_size=2",
      "train.global_batch_size=2",   "train.train_iters=2",        "logger.log_interval=1",
      "scheduler.lr_warmup_iters=0"};
  all.insert(all.end(), overrides.begin(), overrides.end());
  return config::load_config("llama/tiny", all);
}

train::TrainSummary run(const config::Config& config, const std::string& run_dir, const std::string& batches = "") {
  train::TrainOptions o;
  o.run_dir = run_dir;
  o.force_cpu = true;
  o.dump_batches_dir = batches;
  return train::train(config, o);
}

model::HostBatch read_batch(const std::string& path) {
  const checkpoint::SafetensorsFile f(path);
  model::HostBatch b;
  auto copy = [&](const char* name, auto& out) {
    const auto* e = f.find(name);
    out.resize(e->nbytes / 4);
    std::memcpy(out.data(), e->data, e->nbytes);
  };
  copy("tokens", b.tokens);
  copy("targets", b.targets);
  copy("loss_mask", b.loss_mask);
  return b;
}

// The loss of step 1 as the CPU model computes it from `folder`'s weights on the dumped batch.
double expected_first_loss(const config::Config& raw, const std::string& folder, const std::string& batch_file) {
  const config::Config c = config::validate(train::apply_pretrained_shapes(raw)).config;
  const model::ModelSpec spec = config::model_spec(c);
  model::CpuModel cpu(spec, config::batch_spec(c), train::optimizer_spec(c), {static_cast<uint64_t>(c.rng.seed), 0});
  std::vector<float> weights;
  checkpoint::load_hf_weights(checkpoint::resolve_model_folder(folder, "test"), cpu.layout(), weights,
                              checkpoint::WeightSource::main_params, "test");
  const std::vector<float> zeros(weights.size(), 0.0f);
  cpu.load_state(weights, zeros, zeros, 0, {static_cast<uint64_t>(c.rng.seed), 0});
  return cpu.compute_loss(read_batch(batch_file), 0);
}

// Run `b` (train.train_iters=1) into DIR/run_b: step 1's loss is the CPU model's with `folder`'s weights.
void expect_one_step_from(const config::Config& b, const Scratch& dir, const std::string& folder) {
  const auto summary = run(b, dir / "run_b", dir / "batches_b");
  EXPECT_EQ(summary.steps_done, 1);
  EXPECT_EQ(summary.first_loss,
            static_cast<float>(expected_first_loss(b, folder, dir / "batches_b/batch_0000001.safetensors")));
}

TEST(Pretrained, HuggingFaceFolderShapesAndWeights) {
  Scratch dir;
  const std::string hf = make_hf_folder(dir / "hf");
  const config::Config c = tiny_config({"checkpoint.pretrained_checkpoint=" + hf});
  const config::Config shaped = train::apply_pretrained_shapes(c);
  EXPECT_EQ(shaped.model.num_layers, 2);
  EXPECT_EQ(shaped.model.hidden_size, 32);
  EXPECT_EQ(shaped.model.num_attention_heads, 4);
  EXPECT_EQ(shaped.model.num_query_groups, 2);
  EXPECT_EQ(shaped.model.ffn_hidden_size, 48);
  EXPECT_EQ(shaped.model.vocab_size, 64);
  const auto summary = run(c, dir / "run", dir / "batches");
  EXPECT_EQ(summary.steps_done, 2);
  EXPECT_EQ(summary.first_loss,
            static_cast<float>(expected_first_loss(c, hf, dir / "batches/batch_0000001.safetensors")));
  // A from-scratch run of the same shapes starts elsewhere: the weights above were the folder's.
  config::Config from_scratch = shaped;
  from_scratch.checkpoint.pretrained_checkpoint.reset();
  const auto scratch = run(from_scratch, dir / "run_scratch");
  EXPECT_NE(scratch.first_loss, summary.first_loss);
}

TEST(Pretrained, OwnCheckpointFolderAtStepZeroWithFreshOptimizer) {
  Scratch dir;
  const std::string hf = make_hf_folder(dir / "hf");
  // Run A: 2 steps from the HF folder, saved at step 2 (a stepgraph checkpoint).
  run(tiny_config({"checkpoint.pretrained_checkpoint=" + hf, "checkpoint.save=" + (dir / "a")}), dir / "run_a");
  // Run B: starts from run A's checkpoint at step 0.
  const config::Config b = tiny_config({"checkpoint.pretrained_checkpoint=" + (dir / "a"), "train.train_iters=1"});
  expect_one_step_from(b, dir, dir / "a");
}

TEST(Pretrained, MismatchedShapesListEachKeyAndTheFix) {
  Scratch dir;
  const std::string hf = make_hf_folder(dir / "hf");
  const config::Config c = tiny_config({"checkpoint.pretrained_checkpoint=" + hf, "model.hidden_size=48",
                                        "model.share_embeddings_and_output_weights=true", "model.rotary_base=500000"});
  const std::string error = test::thrown_message([&] { train::apply_pretrained_shapes(c); });
  EXPECT_NE(error.find("3 differences"), std::string::npos) << error;
  EXPECT_NE(error.find("model.hidden_size: config.json hidden_size = 32, configured 48"), std::string::npos) << error;
  EXPECT_NE(error.find("model.share_embeddings_and_output_weights: config.json tie_word_embeddings = false"),
            std::string::npos)
      << error;
  EXPECT_NE(error.find("model.rotary_base: config.json rope_theta = 10000, configured 500000"), std::string::npos)
      << error;
  EXPECT_NE(error.find("model.hidden_size=32 model.rotary_base=10000 model.share_embeddings_and_output_weights=false"),
            std::string::npos)
      << error;
  // Through train() too, before anything runs.
  EXPECT_NE(test::thrown_message([&] { run(c, dir / "run"); }).find("checkpoint.pretrained_checkpoint"),
            std::string::npos);
}

TEST(Pretrained, ALlamaFolderIsRefusedForAModelWithoutRopeOrSwigluOrWithAnotherHeadDim) {
  Scratch dir;
  const std::string hf = make_hf_folder(dir / "hf");  // hidden 32, 4 heads: head_dim 8
  const config::Config c =
      tiny_config({"checkpoint.pretrained_checkpoint=" + hf, "model.position_embedding_type=none",
                   "model.activation_func=squared_relu", "model.gated_linear_unit=false", "model.kv_channels=16"});
  const std::string error = test::thrown_message([&] { train::apply_pretrained_shapes(c); });
  EXPECT_NE(error.find("4 differences"), std::string::npos) << error;
  EXPECT_NE(error.find("model.kv_channels: config.json head_dim = 8, configured 16"), std::string::npos) << error;
  EXPECT_NE(error.find("model.position_embedding_type: config.json describes RoPE attention"), std::string::npos)
      << error;
  EXPECT_NE(error.find("model.activation_func: config.json hidden_act = silu, configured squared_relu"),
            std::string::npos)
      << error;
  EXPECT_NE(error.find("model.gated_linear_unit: "), std::string::npos) << error;
  EXPECT_NE(error.find("model.kv_channels=8 model.position_embedding_type=rope model.activation_func=silu "
                       "model.gated_linear_unit=true"),
            std::string::npos)
      << error;
  // Only position_embedding_type: refused before anything trains (it used to train, silently without RoPE).
  const config::Config no_rope = tiny_config(
      {"checkpoint.pretrained_checkpoint=" + hf, "model.position_embedding_type=none", "train.train_iters=1"});
  const std::string run_error = test::thrown_message([&] { run(no_rope, dir / "run"); });
  EXPECT_NE(run_error.find("1 difference"), std::string::npos) << run_error;
  EXPECT_NE(run_error.find("model.position_embedding_type=rope"), std::string::npos) << run_error;
}

// A folder of a Llama variant (make_hf_llama.py's `make_flag`) trains with the boolean `key` on (step 1's loss is the
// CPU model's from the folder's weights, the variant's tensors included); a model configured without it is refused for
// that folder, the error saying what config.json `describes`, and one with it for a Llama folder.
void expect_variant_folder_trains_with_its_key(const Scratch& dir, const std::string& make_flag, const std::string& key,
                                               const std::string& describes) {
  const std::string folder = make_hf_folder(dir / make_flag.substr(2), make_flag);
  expect_one_step_from(
      tiny_config({"checkpoint.pretrained_checkpoint=" + folder, key + "=true", "train.train_iters=1"}), dir, folder);
  const std::string without = test::thrown_message(
      [&] { train::apply_pretrained_shapes(tiny_config({"checkpoint.pretrained_checkpoint=" + folder})); });
  EXPECT_NE(without.find(key + ": config.json describes " + describes + ", configured false"), std::string::npos)
      << without;
  EXPECT_NE(without.find(key + "=true"), std::string::npos) << without;
  const std::string llama = make_hf_folder(dir / "llama");
  const std::string with = test::thrown_message([&] {
    train::apply_pretrained_shapes(tiny_config({"checkpoint.pretrained_checkpoint=" + llama, key + "=true"}));
  });
  EXPECT_NE(with.find(key + "=false"), std::string::npos) << with;
}

TEST(Pretrained, AQwen3FolderTrainsWithItsQueryAndKeyNorms) {
  expect_variant_folder_trains_with_its_key(Scratch{}, "--qwen3", "model.qk_layernorm",
                                            "Qwen3 (q_norm and k_norm in every attention)");
}

TEST(Pretrained, AQwen2FolderTrainsWithItsQkvBiases) {
  expect_variant_folder_trains_with_its_key(Scratch{}, "--qwen2", "model.add_qkv_bias",
                                            "Qwen2 (a bias on q_proj, k_proj and v_proj)");
}

TEST(Pretrained, ALlamaFolderWithBiasesTrainsWithAddBiasLinear) {
  expect_variant_folder_trains_with_its_key(
      Scratch{}, "--bias-linear", "model.add_bias_linear",
      "Llama with attention_bias and mlp_bias (a bias on every linear of attention and the MLP)");
}

// A Mistral or Phi-3 folder trains as the Llama it is while its sequences fit its sliding_window (16 tokens here, the
// window 16 or none: step 1's loss is the CPU model's from its weights, Phi-3's read from its fused tensors); a window
// shorter than model.seq_length is refused, naming both lengths, the folder's config.json and the key to lower.
TEST(Pretrained, AMistralFolderTrainsWithinItsSlidingWindow) {
  for (const char* flags : {"--mistral 16", "--mistral 0", "--phi3 16"}) {  // 0: sliding_window null
    const Scratch dir;  // one run folder each (Scratch's path is the process's)
    const std::string folder = make_hf_folder(dir / "source", flags);
    const config::Config c = tiny_config({"checkpoint.pretrained_checkpoint=" + folder, "train.train_iters=1"});
    EXPECT_EQ(train::apply_pretrained_shapes(c).model.num_query_groups, 2) << flags;
    expect_one_step_from(c, dir, folder);
  }
  const Scratch dir;
  const std::string narrow = make_hf_folder(dir / "mistral_8", "--mistral 8");
  const std::string error = test::thrown_message(
      [&] { train::apply_pretrained_shapes(tiny_config({"checkpoint.pretrained_checkpoint=" + narrow})); });
  EXPECT_NE(
      error.find("model.seq_length = 16 is longer than the folder's sliding_window = 8 (" + narrow + "/config.json)"),
      std::string::npos)
      << error;
  EXPECT_NE(error.find("set model.seq_length <= 8"), std::string::npos) << error;
}

// A Phi-3 folder with partial rotary (Phi-4-mini's partial_rotary_factor 0.75: 6 of each head's 8 dimensions here):
// a configuration that rotates the whole head is refused naming model.rotary_percent and the folder's share; one
// that sets it trains from the folder's weights.
TEST(Pretrained, APhi3FolderWithPartialRotaryTrainsWithItsShareOfEachHead) {
  const Scratch dir;
  const std::string folder = make_hf_folder(dir / "phi3_partial", "--phi3 0 --partial-rotary 0.75");
  const std::string pre = "checkpoint.pretrained_checkpoint=" + folder;
  const std::string error = test::thrown_message([&] { train::apply_pretrained_shapes(tiny_config({pre})); });
  EXPECT_NE(error.find("model.rotary_percent: config.json partial_rotary_factor = 0.75, configured 1"),
            std::string::npos)
      << error;
  EXPECT_NE(error.find("model.rotary_percent=0.75"), std::string::npos) << error;
  const config::Config c = tiny_config({pre, "model.rotary_percent=0.75", "train.train_iters=1"});
  EXPECT_EQ(config::model_spec(train::apply_pretrained_shapes(c)).rotary_dim, 6);
  expect_one_step_from(c, dir, folder);
}

// LongRoPE (Phi-3.5-mini's rope_type longrope): a recipe without the lists takes the folder's four values (logged) and
// trains from its weights with them; lists that are set must be the folder's, each difference listed with its fix.
TEST(Pretrained, ALongRopeFolderGivesItsListsAndTrainsWithThem) {
  const Scratch dir;
  const std::string folder = make_hf_folder(dir / "phi3_longrope", "--phi3 0 --longrope --original-max-pos 64");
  const std::string pre = "checkpoint.pretrained_checkpoint=" + folder;
  const config::Config taken = train::apply_pretrained_shapes(tiny_config({pre}));
  EXPECT_EQ(taken.model.longrope_short_factor, (std::vector<double>{1.0f, 1.05f, 1.1f, 1.15f}));
  EXPECT_EQ(taken.model.longrope_long_factor, (std::vector<double>{1.0, 2.5, 4.0, 5.5}));
  EXPECT_EQ(taken.model.longrope_original_max_position_embeddings, 64);
  EXPECT_DOUBLE_EQ(taken.model.longrope_attention_factor, std::sqrt(1.0 + std::log(4.0) / std::log(64.0)));
  const model::ModelSpec spec = config::model_spec(config::validate(taken).config);
  EXPECT_EQ(spec.rope_scaling.longrope_pairs, 4);
  EXPECT_EQ(spec.rope_scaling.longrope_factors[3], 1.15f) << "16 positions are within 64: the short list";
  const std::string error = test::thrown_message([&] {
    train::apply_pretrained_shapes(tiny_config({pre, "model.longrope_short_factor=[1,1,1,1]",
                                                "model.longrope_long_factor=[1,2.5,4,5.5]",
                                                "model.longrope_original_max_position_embeddings=64"}));
  });
  EXPECT_NE(error.find("model.longrope_short_factor: config.json rope_scaling.short_factor = [1,1.04999995,1.10000002,"
                       "1.14999998], configured [1,1,1,1]"),
            std::string::npos)
      << error;
  EXPECT_NE(error.find("model.longrope_attention_factor: config.json LongRoPE's attention factor"), std::string::npos)
      << error;
  EXPECT_EQ(error.find("model.longrope_long_factor"), std::string::npos) << error;
  const config::Config c = tiny_config({pre, "train.train_iters=1"});
  expect_one_step_from(c, dir, folder);
}

// A Qwen2-MoE folder: the shared expert's width is taken from it, its gate must be configured (the error names
// moe_shared_expert_gate and its fix), and a run configured so trains from its weights, the gate's included.
TEST(Pretrained, AQwen2MoeFolderTrainsWithItsGatedSharedExpert) {
  Scratch dir;
  const std::string folder =
      make_hf_folder(dir / "qwen2_moe", "--qwen2 --experts 4 --topk 2 --moe-ffn 16 --shared-ffn 24 --mlp-only 1");
  const std::vector<std::string> qwen2_moe = {"checkpoint.pretrained_checkpoint=" + folder, "model.add_qkv_bias=true",
                                              "model.moe_router_pre_softmax=true", "model.moe_layer_freq=[1,0]"};
  const std::string error = test::thrown_message([&] { train::apply_pretrained_shapes(tiny_config(qwen2_moe)); });
  EXPECT_NE(error.find("model.moe_shared_expert_gate: config.json describes Qwen2-MoE's router, configured false"),
            std::string::npos)
      << error;
  EXPECT_NE(error.find("model.moe_shared_expert_gate=true"), std::string::npos) << error;
  std::vector<std::string> gated = qwen2_moe;
  gated.push_back("model.moe_shared_expert_gate=true");
  const config::Config applied = train::apply_pretrained_shapes(tiny_config(gated));
  EXPECT_EQ(applied.model.moe_shared_expert_intermediate_size, 24);
  gated.push_back("train.train_iters=1");
  expect_one_step_from(tiny_config(gated), dir, folder);
}

// A Qwen3-MoE folder (block 1 dense, norm_topk_prob): the experts' shape keys are taken from it, the MoE blocks and
// the routing must match (listed with their fixes), and a run configured so trains from its weights.
TEST(Pretrained, AQwen3MoeFolderGivesItsExpertsAndListsItsBlocksAndRouter) {
  Scratch dir;
  const std::string folder = make_hf_folder(dir / "qwen3_moe",
                                            "--qwen3 --experts 4 --topk 2 --moe-ffn 16 --mlp-only 1 "
                                            "--norm-topk");
  const std::string error = test::thrown_message([&] {
    train::apply_pretrained_shapes(tiny_config({"checkpoint.pretrained_checkpoint=" + folder, "model.qk_layernorm=true",
                                                "model.moe_router_pre_softmax=true"}));
  });
  EXPECT_NE(error.find("model.moe_layer_freq: config.json's mlp_only_layers and decoder_sparse_step make the MoE "
                       "blocks [1,0], configured [1,1]"),
            std::string::npos)
      << error;
  EXPECT_NE(error.find("model.moe_router_pre_softmax: config.json norm_topk_prob = true, configured true"),
            std::string::npos)
      << error;
  EXPECT_NE(error.find("model.moe_layer_freq=[1,0] model.moe_router_pre_softmax=false"), std::string::npos) << error;
  const config::Config c = tiny_config({"checkpoint.pretrained_checkpoint=" + folder, "model.qk_layernorm=true",
                                        "model.moe_layer_freq=[1,0]", "train.train_iters=1"});
  const config::Config shaped = train::apply_pretrained_shapes(c);
  EXPECT_EQ(shaped.model.num_moe_experts, 4);
  EXPECT_EQ(shaped.model.moe_ffn_hidden_size, 16);
  EXPECT_EQ(shaped.model.ffn_hidden_size, 48);
  expect_one_step_from(c, dir, folder);
}

TEST(Pretrained, Llama3RopeScalingListsOnlyTheKeysThatDiffer) {
  Scratch dir;
  const std::string hf = make_hf_folder(dir / "hf", "--rope-scaling 8 --original-max-pos 8192");
  const std::string pre = "checkpoint.pretrained_checkpoint=" + hf;
  // Same factor, scaling off: one difference, not a "factor 8, configured 8" line.
  std::string error = test::thrown_message([&] { train::apply_pretrained_shapes(tiny_config({pre})); });
  EXPECT_NE(error.find("(1 difference)"), std::string::npos) << error;
  EXPECT_NE(error.find("model.rope_scaling: config.json rope_scaling = true, configured false"), std::string::npos)
      << error;
  EXPECT_EQ(error.find("rope_scaling_factor"), std::string::npos) << error;
  // Another factor, scaling off: both keys, so that the fix is complete.
  error = test::thrown_message([&] {
    train::apply_pretrained_shapes(tiny_config({pre, "model.rope_scaling_factor=32"}));
  });
  EXPECT_NE(error.find("model.rope_scaling=true model.rope_scaling_factor=8"), std::string::npos) << error;
  const config::Config fixed = train::apply_pretrained_shapes(tiny_config({pre, "model.rope_scaling=true"}));
  EXPECT_TRUE(fixed.model.rope_scaling);
}

// Nemotron 3's layer kinds on the CPU backend (Mamba, MoE with squared-ReLU and shared experts routed by
// sigmoid scores, attention without RoPE, a squared-ReLU MLP), 16-token sequences, 2 per step.
config::Config nemotron_config(const std::vector<std::string>& overrides) {
  std::vector<std::string> all = {"model.hybrid_override_pattern=ME*-", "model.num_layers=4", "model.hidden_size=64",
                                  "model.num_attention_heads=2", "model.num_query_groups=2",
                                  "model.ffn_hidden_size=96", "model.vocab_size=128",
                                  "model.activation_func=squared_relu", "model.gated_linear_unit=false",
                                  "model.mamba_head_dim=64", "model.mamba_num_groups=2", "model.mamba_state_dim=16",
                                  "model.num_moe_experts=4", "model.moe_router_topk=2", "model.moe_ffn_hidden_size=32",
                                  "model.moe_shared_expert_intermediate_size=48",
                                  "model.moe_router_score_function=sigmoid", "model.moe_router_enable_expert_bias=true",
                                  "model.moe_router_topk_scaling_factor=2.5", "model.seq_length=16",
                                  "dataset.seq_length=16", "train.micro_batch_size=2", "train.global_batch_size=2",
                                  "train.train_iters=2", "logger.log_interval=1", "scheduler.lr_warmup_iters=0"};
  all.insert(all.end(), overrides.begin(), overrides.end());
  return config::load_config("hybrid/tiny_hybrid", all);
}

// A NemotronH folder (here one stepgraph saved) gives a run with the layer pattern and shape keys unset its
// layers, its shapes and its weights.
TEST(Pretrained, ANemotronHFolderGivesItsLayersShapesAndWeights) {
  Scratch dir;
  run(nemotron_config({"checkpoint.save=" + (dir / "a")}), dir / "run_a");
  const config::Config b = nemotron_config(
      {"checkpoint.pretrained_checkpoint=" + (dir / "a"), "model.hybrid_override_pattern=null", "model.num_layers=0",
       "model.hidden_size=0", "model.num_attention_heads=0", "model.num_query_groups=null",
       "model.ffn_hidden_size=null", "model.vocab_size=null", "train.train_iters=1"});
  const config::Config shaped = train::apply_pretrained_shapes(b);
  EXPECT_EQ(shaped.model.hybrid_override_pattern, "ME*-");
  EXPECT_EQ(shaped.model.num_layers, 4);
  EXPECT_EQ(shaped.model.hidden_size, 64);
  EXPECT_EQ(shaped.model.ffn_hidden_size, 96);
  EXPECT_EQ(shaped.model.vocab_size, 128);
  expect_one_step_from(b, dir, dir / "a");
}

// Routers whose bias is not zero (a model trained with it) choose experts with it: a run configured without the
// expert bias is refused before step 1, naming the tensor, its value and the fix. Zero biases (a model trained
// without it) start such a run.
TEST(Pretrained, ANonZeroExpertBiasNeedsARunThatRoutesWithIt) {
  Scratch dir;
  run(nemotron_config({"checkpoint.save=" + (dir / "a")}), dir / "run_a");
  const std::string error = test::thrown_message([&] {
    run(nemotron_config({"checkpoint.pretrained_checkpoint=" + (dir / "a"), "model.moe_router_enable_expert_bias=false",
                         "train.train_iters=1"}),
        dir / "run_refused");
  });
  EXPECT_NE(error.find("backbone.layers.1.mixer.gate.e_score_correction_bias["), std::string::npos) << error;
  EXPECT_NE(error.find("set model.moe_router_enable_expert_bias=true"), std::string::npos) << error;
  EXPECT_FALSE(fs::exists(dir / "run_refused/metrics.jsonl")) << "refused before training";

  run(nemotron_config({"model.moe_router_enable_expert_bias=false", "checkpoint.save=" + (dir / "c")}), dir / "run_c");
  expect_one_step_from(nemotron_config({"checkpoint.pretrained_checkpoint=" + (dir / "c"),
                                        "model.moe_router_enable_expert_bias=false", "train.train_iters=1"}),
                       dir, dir / "c");
}

TEST(Pretrained, ANemotronHFolderListsWhatTheModelConfiguresOtherwise) {
  Scratch dir;
  run(nemotron_config({"checkpoint.save=" + (dir / "a")}), dir / "run_a");
  const std::string pre = "checkpoint.pretrained_checkpoint=" + (dir / "a");
  std::string error = test::thrown_message([&] {
    train::apply_pretrained_shapes(nemotron_config({pre, "model.position_embedding_type=rope",
                                                    "model.mamba_state_dim=32", "model.moe_router_topk=3",
                                                    "model.moe_expert_capacity_factor=1.0"}));
  });
  EXPECT_NE(error.find("(4 differences)"), std::string::npos) << error;
  EXPECT_NE(error.find("model.mamba_state_dim: config.json ssm_state_size = 16, configured 32"), std::string::npos)
      << error;
  EXPECT_NE(error.find("model.moe_router_topk: config.json num_experts_per_tok = 2, configured 3"), std::string::npos)
      << error;
  EXPECT_NE(error.find("model.position_embedding_type=none model.mamba_state_dim=16 model.moe_router_topk=2 "
                       "model.moe_expert_capacity_factor=null"),
            std::string::npos)
      << error;
  // Another layer pattern: that alone (the layers' options are moot for another stack).
  error = test::thrown_message(
      [&] { train::apply_pretrained_shapes(nemotron_config({pre, "model.hybrid_override_pattern=M*--"})); });
  EXPECT_NE(error.find("(1 difference)"), std::string::npos) << error;
  EXPECT_NE(error.find("model.hybrid_override_pattern: config.json layers = ME*-, configured M*--"), std::string::npos)
      << error;
  // A Llama configuration (GPT blocks) from the NemotronH folder: its pattern is taken, then SwiGLU and RoPE
  // are what differ.
  error = test::thrown_message([&] { train::apply_pretrained_shapes(tiny_config({pre})); });
  EXPECT_NE(error.find("model.activation_func=squared_relu model.gated_linear_unit=false"), std::string::npos)
      << error;
}

// A Mixtral folder (one stepgraph saved from moe/tiny_moe's layout): the experts' count and width are taken when
// unset, its weights start the run, and a router configured otherwise is listed with the fix.
TEST(Pretrained, AMixtralFolderGivesItsExpertsAndListsAnotherRouter) {
  Scratch dir;
  const std::vector<std::string> moe = {"model.num_moe_experts=4", "model.moe_ffn_hidden_size=32",
                                        "model.moe_aux_loss_coeff=1e-2"};
  std::vector<std::string> a = {"model.num_layers=2", "model.hidden_size=32", "model.num_attention_heads=4",
                                "model.num_query_groups=2", "model.ffn_hidden_size=48", "model.vocab_size=64",
                                "checkpoint.save=" + (dir / "a")};
  a.insert(a.end(), moe.begin(), moe.end());
  run(tiny_config(a), dir / "run_a");
  const std::string pre = "checkpoint.pretrained_checkpoint=" + (dir / "a");
  const config::Config b = tiny_config({pre, "train.train_iters=1"});  // experts and width unset: taken
  const config::Config shaped = train::apply_pretrained_shapes(b);
  EXPECT_EQ(shaped.model.num_moe_experts, 4);
  EXPECT_EQ(shaped.model.moe_ffn_hidden_size, 32);
  expect_one_step_from(b, dir, dir / "a");
  const std::string error = test::thrown_message([&] {
    train::apply_pretrained_shapes(tiny_config({pre, "model.moe_router_topk=3", "model.moe_router_pre_softmax=true",
                                                "model.moe_expert_capacity_factor=1.5", "model.moe_layer_freq=2"}));
  });
  EXPECT_NE(error.find("(4 differences)"), std::string::npos) << error;
  EXPECT_NE(error.find("model.moe_router_topk: config.json num_experts_per_tok = 2, configured 3"), std::string::npos)
      << error;
  EXPECT_NE(error.find("model.moe_router_topk=2 model.moe_layer_freq=1 model.moe_router_pre_softmax=false "
                       "model.moe_expert_capacity_factor=null"),
            std::string::npos)
      << error;
}

// Megatron's expert biases (model.add_bias_linear with experts) on the CPU backend: a run trains them (they leave
// their zeros) and saves a stepgraph checkpoint without config.json (no transformers class has such experts). As a
// pretrained folder it is refused, naming checkpoint.load; resumed with it, step 3 is the step an uninterrupted run
// takes.
TEST(Pretrained, AnMoeCheckpointWithExpertBiasesResumesAndIsNoPretrainedFolder) {
  Scratch dir;
  const std::vector<std::string> shapes = {"model.num_layers=2",          "model.hidden_size=32",
                                           "model.num_attention_heads=4", "model.num_query_groups=2",
                                           "model.ffn_hidden_size=48",    "model.vocab_size=64",
                                           "model.num_moe_experts=4",     "model.moe_ffn_hidden_size=32",
                                           "model.add_bias_linear=true",  "scheduler.lr_decay_iters=3"};
  const auto with = [&](std::vector<std::string> more) {
    more.insert(more.begin(), shapes.begin(), shapes.end());
    return tiny_config(more);
  };
  run(with({"checkpoint.save=" + (dir / "a")}), dir / "run_a");
  const fs::path saved = fs::path(dir / "a") / "iter_0000002";
  EXPECT_FALSE(fs::exists(saved / "config.json"));
  const checkpoint::SafetensorsFile main((saved / "optimizer_main_params.safetensors").string());
  int expert_biases = 0, moved = 0;
  for (int layer : {1, 3}) {
    for (int e = 0; e < 4; ++e) {
      for (const char* linear : {"w1", "w3", "w2"}) {
        const std::string name = "model.layers." + std::to_string(layer / 2) + ".block_sparse_moe.experts." +
                                 std::to_string(e) + "." + linear + ".bias";
        const auto* t = main.find(name);
        ASSERT_NE(t, nullptr) << name;
        ++expert_biases;
        std::vector<float> v(t->nbytes / sizeof(float));
        std::memcpy(v.data(), t->data, t->nbytes);
        moved += std::any_of(v.begin(), v.end(), [](float x) { return x != 0.0f; }) ? 1 : 0;
      }
    }
  }
  EXPECT_EQ(expert_biases, 24);
  EXPECT_GT(moved, expert_biases / 2) << "the experts' biases should have left their zeros";
  const std::string refused = test::thrown_message([&] {
    run(with({"checkpoint.pretrained_checkpoint=" + (dir / "a"), "train.train_iters=1"}), dir / "run_p");
  });
  EXPECT_NE(refused.find("continue training this checkpoint with checkpoint.load=" + (dir / "a")), std::string::npos)
      << refused;
  const auto resumed = run(with({"checkpoint.load=" + (dir / "a"), "train.train_iters=3"}), dir / "run_b");
  EXPECT_EQ(resumed.start_step, 2);
  EXPECT_EQ(resumed.steps_done, 3);
  const auto whole = run(with({"train.train_iters=3"}), dir / "run_c");
  EXPECT_EQ(resumed.last_loss, whole.last_loss) << "a resumed step 3 differs from an uninterrupted one";
}

TEST(Pretrained, ACheckpointTrainedWithKvChannelsStartsARunWithItsHeadDim) {
  Scratch dir;
  // Run A from a random init: 4 heads of 16 over hidden 32 (head_dim != hidden / heads), saved at step 2.
  run(tiny_config({"model.num_layers=2", "model.hidden_size=32", "model.num_attention_heads=4",
                   "model.num_query_groups=2", "model.ffn_hidden_size=48", "model.vocab_size=64",
                   "model.kv_channels=16", "checkpoint.save=" + (dir / "a")}),
      dir / "run_a");
  // Run B starts from it with every shape key unset: the head dim is taken as model.kv_channels.
  const config::Config b = tiny_config({"checkpoint.pretrained_checkpoint=" + (dir / "a"), "train.train_iters=1"});
  EXPECT_EQ(train::apply_pretrained_shapes(b).model.kv_channels, 16);
  expect_one_step_from(b, dir, dir / "a");
  // A configured head dim that differs names model.kv_channels, not the folder's tensors.
  const std::string error = test::thrown_message([&] {
    train::apply_pretrained_shapes(
        tiny_config({"checkpoint.pretrained_checkpoint=" + (dir / "a"), "model.kv_channels=8"}));
  });
  EXPECT_NE(error.find("model.kv_channels: config.json head_dim = 16, configured 8"), std::string::npos) << error;
}

TEST(Pretrained, AnEmptyPathIsRefusedAsEmpty) {
  Scratch dir;
  // From YAML (`pretrained_checkpoint: ""`): validation's empty-path rule, not "no such directory".
  config::Config c = config::load_config_yaml("checkpoint:\n  pretrained_checkpoint: \"\"\n", "empty.yaml");
  EXPECT_EQ(train::apply_pretrained_shapes(c).checkpoint.pretrained_checkpoint, "");
  c = tiny_config({"checkpoint.pretrained_checkpoint=\"\""});
  const std::string error = test::thrown_message([&] { run(c, dir / "run"); });
  EXPECT_NE(error.find("checkpoint.pretrained_checkpoint is an empty path"), std::string::npos) << error;
  EXPECT_EQ(error.find("no such directory"), std::string::npos) << error;
}

TEST(Pretrained, LoadWinsWhenItHoldsACheckpoint) {
  Scratch dir;
  const std::string hf = make_hf_folder(dir / "hf");
  const std::string pre = "checkpoint.pretrained_checkpoint=" + hf;
  // checkpoint.load names an empty folder: the run starts from the pretrained weights and saves there.
  fs::create_directories(dir / "ckpt");
  const config::Config first =
      tiny_config({pre, "checkpoint.load=" + (dir / "ckpt"), "checkpoint.save=" + (dir / "ckpt")});
  EXPECT_FALSE(train::has_checkpoint_to_resume(first));
  const auto a = run(first, dir / "run_a", dir / "batches_a");
  EXPECT_EQ(a.first_loss,
            static_cast<float>(expected_first_loss(first, hf, dir / "batches_a/batch_0000001.safetensors")));
  // Now it holds step 2: the same command with more steps resumes there instead.
  const config::Config again = tiny_config(
      {pre, "checkpoint.load=" + (dir / "ckpt"), "checkpoint.save=" + (dir / "ckpt"), "train.train_iters=3"});
  EXPECT_TRUE(train::has_checkpoint_to_resume(again));
  const auto b = run(again, dir / "run_b");
  EXPECT_EQ(b.steps_done, 3);
}

}  // namespace
}  // namespace sg
