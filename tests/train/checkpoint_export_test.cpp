// What a saved checkpoint's Hugging Face files keep of the run's inputs, on the CPU backend, in process:
//   * fine-tuned from a Hugging Face folder (checkpoint.pretrained_checkpoint) without a tokenizer, config.json
//     keeps the source's context (max_position_embeddings, not the seq_length trained) and its bos/eos ids as
//     written; rope_scaling's original context is an integer, as transformers requires; from scratch the
//     context is seq_length and there are no special ids;
//   * resumed (checkpoint.load) without pretrained_checkpoint, or with it, the saves keep what the loaded folder's
//     config.json has: the source's context and ids carry over every resume;
//   * with a tokenizer, every file transformers' AutoTokenizer reads (chat_template.jinja and
//     additional_chat_templates/NAME.jinja included) is copied byte for byte with its checksum in train_state.json,
//     which verification checks; eos_token_id is the tokenizer's EOD and bos_token_id its BOS (null without one).
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint/checkpoint_dir.h"
#include "checkpoint/file_checksum.h"
#include "checkpoint/hf_import.h"
#include "checkpoint/safetensors.h"
#include "config/config.h"
#include "gpu_test_util.h"
#include "model/layer_registry.h"
#include "process_util.h"
#include "test_dir.h"
#include "test_util.h"
#include "train/checkpointing.h"
#include "train/pretrained.h"
#include "train/trainer.h"

namespace sg {
namespace {

namespace fs = std::filesystem;

std::string make_hf_folder(const fs::path& dir, const std::string& flags) {
  const auto r = test::run_command("python3 " + std::string(STEPGRAPH_SOURCE_DIR) +
                                   "/tests/checkpoint/make_hf_llama.py --dtype bf16 --std 0.05 " + flags + " --out " +
                                   test::shell_quote(dir.string()) + " 2>&1");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return dir.string();
}

nlohmann::json read_json(const fs::path& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  return nlohmann::json::parse(in);
}

// Sets `key` of FOLDER/config.json to `value`.
void edit_config(const std::string& folder, const std::string& key, const nlohmann::json& value) {
  nlohmann::json c = read_json(folder + "/config.json");
  c[key] = value;
  std::ofstream(folder + "/config.json") << c.dump(2);
}

// llama/tiny on mock data, 16-token sequences, 2 steps; the shape keys unset (the pretrained folder's).
config::Config tiny_config(const std::vector<std::string>& overrides) {
  std::vector<std::string> all = {
      "model.num_layers=0",          "model.hidden_size=0",        "model.num_attention_heads=0",
      "model.num_query_groups=null", "model.ffn_hidden_size=null", "model.vocab_size=null",
      "model.seq_length=16",         "dataset.seq_length=16",      "train.micro_batch_size=2",
      "train.global_batch_size=2",   "train.train_iters=2",        "scheduler.lr_warmup_iters=0"};
  all.insert(all.end(), overrides.begin(), overrides.end());
  return config::load_config("llama/tiny", all);
}

void run(const config::Config& config, const fs::path& run_dir) {
  train::TrainOptions o;
  o.run_dir = run_dir.string();
  o.force_cpu = true;
  train::train(config, o);
}

// `first`'s run resumed from its saves in CK, for train_iters steps in all: the source's shapes, without the source.
config::Config resumed_from(const config::Config& first, const std::string& ck, int64_t train_iters) {
  config::Config resumed = train::apply_pretrained_shapes(first);
  resumed.checkpoint.pretrained_checkpoint.reset();
  resumed.checkpoint.load = ck;
  resumed.train.train_iters = train_iters;
  return resumed;
}

// Writes each {name, text} into FOLDER (a name may be subfolder/name).
void write_files(const fs::path& folder, const std::vector<std::pair<std::string, std::string>>& files) {
  for (const auto& [name, text] : files) {
    fs::create_directories((folder / name).parent_path());
    std::ofstream(folder / name) << text;
  }
}

// verify_checkpoint_folder's error for FOLDER ("" when it passes), as checkpoint.load verifies it.
std::string verification_error(const fs::path& folder) {
  checkpoint::FolderVerification options;
  options.what = "checkpoint.load";
  return test::thrown_message([&] { checkpoint::verify_checkpoint_folder(folder.string(), options); });
}

// A Llama 3.1-like source (131072 positions, llama3 rope scaling) fine-tuned on mock data without a tokenizer.
TEST(CheckpointExport, KeepsTheSourcesContextAndSpecialTokenIds) {
  const fs::path dir = test::fresh_test_dir("sg_checkpoint_export");
  const std::string hf = make_hf_folder(dir / "hf", "--max-pos 131072 --rope-scaling 8 --original-max-pos 8192");
  edit_config(hf, "bos_token_id", 3);
  edit_config(hf, "eos_token_id", nlohmann::json::array({5, 7}));  // as Llama 3.1 Instruct lists several
  const std::string rope = "model.rope_scaling=true", factor = "model.rope_scaling_factor=8";
  const config::Config c =
      tiny_config({"checkpoint.pretrained_checkpoint=" + hf, "checkpoint.save=" + (dir / "ck").string(), rope, factor});
  run(c, dir / "run");
  const nlohmann::json exported = read_json(dir / "ck/iter_0000002/config.json");
  EXPECT_EQ(exported["max_position_embeddings"], 131072) << exported.dump();
  EXPECT_EQ(exported["bos_token_id"], 3) << exported.dump();
  EXPECT_EQ(exported["eos_token_id"], nlohmann::json::array({5, 7})) << exported.dump();
  const nlohmann::json& original = exported["rope_scaling"]["original_max_position_embeddings"];
  EXPECT_TRUE(original.is_number_integer() && original == 8192) << exported.dump();

  // Fine-tuned again from that checkpoint: the same (its config.json is the source now).
  run(tiny_config({"checkpoint.pretrained_checkpoint=" + (dir / "ck").string(),
                   "checkpoint.save=" + (dir / "ck2").string(), "train.train_iters=1", rope, factor}),
      dir / "run2");
  const nlohmann::json again = read_json(dir / "ck2/iter_0000001/config.json");
  for (const char* key : {"max_position_embeddings", "bos_token_id", "eos_token_id"}) {
    EXPECT_EQ(again[key], exported[key]) << key;
  }

  // A source shorter than model.seq_length: the positions trained count.
  const std::string short_source = make_hf_folder(dir / "short", "--max-pos 8");
  run(tiny_config(
          {"checkpoint.pretrained_checkpoint=" + short_source, "checkpoint.save=" + (dir / "ck_short").string()}),
      dir / "run_short");
  EXPECT_EQ(read_json(dir / "ck_short/iter_0000002/config.json")["max_position_embeddings"], 16);

  // From scratch: the context trained, and no special ids without a tokenizer.
  config::Config scratch = train::apply_pretrained_shapes(c);
  scratch.checkpoint.pretrained_checkpoint.reset();
  scratch.checkpoint.save = (dir / "ck_scratch").string();
  run(scratch, dir / "run_scratch");
  const nlohmann::json fresh = read_json(dir / "ck_scratch/iter_0000002/config.json");
  EXPECT_EQ(fresh["max_position_embeddings"], 16) << fresh.dump();
  EXPECT_TRUE(fresh["bos_token_id"].is_null() && fresh["eos_token_id"].is_null()) << fresh.dump();

  // An id transformers could not use either is refused before the first step, naming the file and the key.
  edit_config(hf, "eos_token_id", "</s>");
  const std::string error = test::thrown_message([&] { run(c, dir / "run_bad"); });
  EXPECT_NE(error.find(hf + "/config.json: eos_token_id = \"</s>\" is not null, a token id or a list"),
            std::string::npos)
      << error;
  fs::remove_all(dir);
}

// Resumed with checkpoint.load and without pretrained_checkpoint, the saves keep the context and ids the first run
// took from its source: the loaded folder's config.json is the source now, so they carry over every resume. With
// pretrained_checkpoint set as well (a fine-tuning run resumed), the loaded folder wins over the pretrained one.
TEST(CheckpointExport, ResumedRunsKeepTheLoadedFoldersContextAndSpecialTokenIds) {
  const fs::path dir = test::fresh_test_dir("sg_checkpoint_export");
  const std::string hf = make_hf_folder(dir / "hf", "--max-pos 131072");
  edit_config(hf, "bos_token_id", 3);
  edit_config(hf, "eos_token_id", nlohmann::json::array({5, 7}));
  const std::string ck = (dir / "ck").string();
  const config::Config first = tiny_config({"checkpoint.pretrained_checkpoint=" + hf, "checkpoint.save=" + ck});
  run(first, dir / "run");
  const auto expect_source_kept = [&](const std::string& iteration) {
    const nlohmann::json saved = read_json(dir / "ck" / iteration / "config.json");
    EXPECT_EQ(saved["max_position_embeddings"], 131072) << iteration << ": " << saved.dump();
    EXPECT_EQ(saved["bos_token_id"], 3) << iteration << ": " << saved.dump();
    EXPECT_EQ(saved["eos_token_id"], nlohmann::json::array({5, 7})) << iteration << ": " << saved.dump();
  };
  expect_source_kept("iter_0000002");

  config::Config resumed = resumed_from(first, ck, 3);
  run(resumed, dir / "run");
  expect_source_kept("iter_0000003");
  resumed.train.train_iters = 4;  // resumed from a resumed run's save
  run(resumed, dir / "run");
  expect_source_kept("iter_0000004");

  // The pretrained folder's ids changed since: the weights came from the loaded folder, whose ids stay.
  edit_config(hf, "bos_token_id", 4);
  config::Config both = resumed;
  both.checkpoint.pretrained_checkpoint = hf;
  both.train.train_iters = 5;
  run(both, dir / "run");
  expect_source_kept("iter_0000005");
  fs::remove_all(dir);
}

// A run started from a Mistral folder with a sliding window saves Mistral folders with that window (the model
// transformers runs beyond the window is then still the source's), and its resumed runs keep it; one started from a
// Mistral folder without a window (the same model as a Llama) saves a Llama folder, and one from a Phi-3 folder with
// a window a Mistral folder. What stepgraph writes reads back
// with the window.
TEST(CheckpointExport, AMistralSourcesWindowIsKeptInEverySave) {
  const fs::path dir = test::fresh_test_dir("sg_checkpoint_export_mistral");
  const std::string hf = make_hf_folder(dir / "hf", "--mistral 16");
  const std::string ck = (dir / "ck").string();
  const config::Config first = tiny_config({"checkpoint.pretrained_checkpoint=" + hf, "checkpoint.save=" + ck});
  run(first, dir / "run");
  const auto expect_mistral = [&](const std::string& iteration) {
    const nlohmann::json saved = read_json(dir / "ck" / iteration / "config.json");
    EXPECT_EQ(saved["model_type"], "mistral") << iteration << ": " << saved.dump();
    EXPECT_EQ(saved["architectures"], nlohmann::json::array({"MistralForCausalLM"})) << iteration;
    EXPECT_EQ(saved["sliding_window"], 16) << iteration;
    EXPECT_FALSE(saved.contains("attention_bias") || saved.contains("mlp_bias")) << iteration << ": " << saved.dump();
    const checkpoint::HfModelConfig back = checkpoint::read_hf_config((dir / "ck" / iteration).string());
    EXPECT_EQ(back.sliding_window, 16) << iteration;
  };
  expect_mistral("iter_0000002");
  config::Config resumed = resumed_from(first, ck, 3);
  run(resumed, dir / "run");
  expect_mistral("iter_0000003");

  const std::string open = make_hf_folder(dir / "open", "--mistral 0");
  run(tiny_config({"checkpoint.pretrained_checkpoint=" + open, "checkpoint.save=" + (dir / "ck_open").string()}),
      dir / "run_open");
  const nlohmann::json saved = read_json(dir / "ck_open" / "iter_0000002" / "config.json");
  EXPECT_EQ(saved["model_type"], "llama") << saved.dump();
  EXPECT_FALSE(saved.contains("sliding_window")) << saved.dump();
  // A Phi-3 folder with a window: the same model as a Mistral one (its tensors fused only in its files).
  const std::string phi3 = make_hf_folder(dir / "phi3", "--phi3 16");
  run(tiny_config({"checkpoint.pretrained_checkpoint=" + phi3, "checkpoint.save=" + (dir / "ck_phi3").string()}),
      dir / "run_phi3");
  const nlohmann::json from_phi3 = read_json(dir / "ck_phi3" / "iter_0000002" / "config.json");
  EXPECT_EQ(from_phi3["model_type"], "mistral") << from_phi3.dump();
  EXPECT_EQ(from_phi3["sliding_window"], 16) << from_phi3.dump();
  fs::remove_all(dir);
}

// A run from a Phi-3 folder with partial rotary (Phi-4-mini's partial_rotary_factor 0.75) and a window saves Phi-3
// folders: Phi3Config with the share and the window, q, k, v and gate, up fused in model.safetensors as Phi3's files
// hold them. The save resumes, its resumed saves keep the window, and the folder reads back as the model trained: its
// fused weights are the optimizer's fp32 ones rounded to bf16 and split again.
TEST(CheckpointExport, APartialRotaryRunSavesPhi3FoldersThatReadBack) {
  const fs::path dir = test::fresh_test_dir("sg_checkpoint_export_phi3");
  const std::string hf = make_hf_folder(dir / "hf", "--phi3 16 --partial-rotary 0.75");
  const std::string ck = (dir / "ck").string();
  const config::Config first =
      tiny_config({"checkpoint.pretrained_checkpoint=" + hf, "checkpoint.save=" + ck, "model.rotary_percent=0.75"});
  run(first, dir / "run");
  const auto expect_phi3 = [&](const std::string& iteration) {
    const fs::path folder = dir / "ck" / iteration;
    const nlohmann::json saved = read_json(folder / "config.json");
    EXPECT_EQ(saved["model_type"], "phi3") << iteration << ": " << saved.dump();
    EXPECT_EQ(saved["partial_rotary_factor"], 0.75) << iteration;
    EXPECT_EQ(saved["sliding_window"], 16) << iteration;
    const checkpoint::SafetensorsFile model((folder / "model.safetensors").string());
    EXPECT_NE(model.find("model.layers.1.self_attn.qkv_proj.weight"), nullptr) << iteration;
    EXPECT_NE(model.find("model.layers.1.mlp.gate_up_proj.weight"), nullptr) << iteration;
    EXPECT_EQ(model.find("model.layers.1.self_attn.q_proj.weight"), nullptr) << iteration;
    const checkpoint::HfModelConfig back = checkpoint::read_hf_config(folder.string());
    EXPECT_EQ(back.spec.rotary_dim, 6) << iteration;
    EXPECT_EQ(back.sliding_window, 16) << iteration;
    // The bf16 file's weights, split again, are the fp32 main weights rounded.
    const model::ModelLayout layout = model::model_layout(back.spec);
    std::vector<float> bf16_weights, main_weights;
    checkpoint::load_hf_weights(folder.string(), layout, bf16_weights, checkpoint::WeightSource::model, "test");
    checkpoint::load_hf_weights(folder.string(), layout, main_weights, checkpoint::WeightSource::main_params, "test");
    EXPECT_EQ(bf16_weights, test::round_bf16(main_weights)) << iteration;
  };
  expect_phi3("iter_0000002");
  run(resumed_from(first, ck, 3), dir / "run");
  expect_phi3("iter_0000003");
  fs::remove_all(dir);
}

// The source's generation_config.json (where Llama 3 Instruct lists its end-of-turn token among the eos ids) is
// written into every save byte for byte with its checksum, so transformers' generate() and stepgraph's stop where the
// source's did; a resumed run takes it from the loaded folder. A malformed one is refused before the first step.
TEST(CheckpointExport, CopiesTheSourcesGenerationConfigIntoEverySave) {
  const fs::path dir = test::fresh_test_dir("sg_checkpoint_export");
  const std::string hf = make_hf_folder(dir / "hf", "");
  edit_config(hf, "eos_token_id", 5);
  const std::string generation = "{\n  \"eos_token_id\": [5, 7, 9],\n  \"temperature\": 0.6\n}\n";
  write_files(hf, {{"generation_config.json", generation}});
  const std::string ck = (dir / "ck").string();
  const config::Config first = tiny_config({"checkpoint.pretrained_checkpoint=" + hf, "checkpoint.save=" + ck});
  run(first, dir / "run");
  const auto expect_copied = [&](const std::string& iteration) {
    const fs::path saved = dir / "ck" / iteration;
    EXPECT_EQ(test::read_file(saved / "generation_config.json"), generation) << iteration;
    EXPECT_TRUE(read_json(saved / "train_state.json")["file_checksums"].contains("generation_config.json"))
        << iteration;
    EXPECT_EQ(verification_error(saved), "") << iteration;
    EXPECT_EQ(checkpoint::read_hf_config(saved.string()).eos_token_ids, (std::vector<int64_t>{5, 7, 9})) << iteration;
  };
  expect_copied("iter_0000002");

  config::Config resumed = resumed_from(first, ck, 3);
  run(resumed, dir / "run");
  expect_copied("iter_0000003");

  write_files(hf, {{"generation_config.json", "{\"eos_token_id\": [5,"}});
  config::Config bad = first;
  bad.checkpoint.save = (dir / "ck_bad").string();
  const std::string error = test::thrown_message([&] { run(bad, dir / "run_bad"); });
  EXPECT_NE(error.find(hf + "/generation_config.json"), std::string::npos) << error;
  EXPECT_FALSE(fs::exists(dir / "ck_bad" / checkpoint::kLatestFile)) << "refused after a step";
  fs::remove_all(dir);
}

// resumed_checkpoint_source reads the loaded folder's config.json as written (a MixtralConfig or NemotronHConfig
// too): none without one, and a value transformers could not use is refused naming the file, the key and the value.
TEST(CheckpointExport, ResumedSourceIsTheLoadedFoldersConfigJson) {
  const fs::path dir = test::fresh_test_dir("sg_checkpoint_export");
  EXPECT_FALSE(train::resumed_checkpoint_source(dir.string()).has_value());
  const std::string path = (dir / "config.json").string();
  const auto write_config = [&](const std::string& text) { std::ofstream(path) << text; };
  write_config(R"({"model_type": "mixtral", "max_position_embeddings": 4096, "eos_token_id": [2, 3]})");
  const std::optional<train::CheckpointSource> source = train::resumed_checkpoint_source(dir.string());
  ASSERT_TRUE(source.has_value());
  EXPECT_EQ(source->max_position_embeddings, 4096);
  EXPECT_TRUE(source->bos_token_id.is_null());
  EXPECT_EQ(source->eos_token_id, nlohmann::json::array({2, 3}));
  for (const std::string value : {R"("4096")", "0", "null"}) {
    write_config(R"({"max_position_embeddings": )" + value + "}");
    const std::string error = test::thrown_message([&] { train::resumed_checkpoint_source(dir.string()); });
    EXPECT_NE(error.find(path + ": max_position_embeddings = " + value + " is not a positive integer"),
              std::string::npos)
        << error;
  }
  write_config(R"({"max_position_embeddings": 16, "bos_token_id": "<s>"})");
  const std::string error = test::thrown_message([&] { train::resumed_checkpoint_source(dir.string()); });
  EXPECT_NE(error.find("the resumed checkpoint: " + path + ": bos_token_id = \"<s>\" is not null"), std::string::npos)
      << error;
  fs::remove_all(dir);
}

// With a tokenizer of its own, the export is that tokenizer's: chat_template.jinja (where transformers >= 4.47
// keeps the chat template) and a slow tokenizer's vocabulary are copied too, each with its checksum; eos_token_id
// is the tokenizer's EOD, not the source's. The context stays the source's.
TEST(CheckpointExport, CopiesEveryTokenizerFileWithItsChecksum) {
  const fs::path dir = test::fresh_test_dir("sg_checkpoint_export");
  const std::string hf = make_hf_folder(dir / "hf", "--max-pos 4096");
  edit_config(hf, "bos_token_id", 3);
  edit_config(hf, "eos_token_id", 5);
  const fs::path tok = dir / "tok";
  fs::create_directories(tok);
  const std::vector<std::pair<std::string, std::string>> files = {
      {"tokenizer.json", R"({"model": {"type": "BPE", "vocab": {"<|endoftext|>": 0, "a": 1, "b": 2}}})"},
      {"tokenizer_config.json", R"({"eos_token": "<|endoftext|>"})"},
      {"chat_template.jinja", "{% for m in messages %}{{ m['content'] }}{% endfor %}"},
      {"additional_chat_templates/tool_use.jinja", "{% for t in tools %}{{ t['name'] }}{% endfor %}"},
      {"vocab.json", R"({"<|endoftext|>": 0, "a": 1, "b": 2})"},
      {"merges.txt", "#version: 0.2\n"}};
  write_files(tok, files);
  std::ofstream(tok / "README.md") << "not read by transformers";
  run(tiny_config({"checkpoint.pretrained_checkpoint=" + hf, "checkpoint.save=" + (dir / "ck").string(),
                   "tokenizer.tokenizer_type=HuggingFaceTokenizer", "tokenizer.tokenizer_model=" + tok.string()}),
      dir / "run");
  const fs::path saved = dir / "ck/iter_0000002";
  const nlohmann::json checksums = read_json(saved / "train_state.json")["file_checksums"];
  for (const auto& [name, text] : files) {
    ASSERT_TRUE(fs::exists(saved / name)) << name;
    std::ifstream in(saved / name);
    EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), text) << name;
    const checkpoint::FileDigest digest = checkpoint::file_digest((tok / name).string());
    ASSERT_TRUE(checksums.contains(name)) << name << " has no checksum: " << checksums.dump();
    EXPECT_EQ(checksums[name]["bytes"], digest.bytes) << name;
    EXPECT_EQ(checksums[name]["crc32"], checkpoint::crc32_hex(digest.crc32)) << name;
  }
  EXPECT_FALSE(fs::exists(saved / "README.md"));
  const nlohmann::json exported = read_json(saved / "config.json");
  EXPECT_EQ(exported["eos_token_id"], 0) << exported.dump();
  EXPECT_TRUE(exported["bos_token_id"].is_null()) << exported.dump();
  EXPECT_EQ(exported["max_position_embeddings"], 4096) << exported.dump();

  // The extra template is verified as every recorded file is: a resume loads the folder, and saves it again.
  EXPECT_EQ(verification_error(saved), "");
  run(tiny_config({"checkpoint.pretrained_checkpoint=" + hf, "checkpoint.load=" + (dir / "ck").string(),
                   "checkpoint.save=" + (dir / "ck").string(), "train.train_iters=3",
                   "tokenizer.tokenizer_type=HuggingFaceTokenizer", "tokenizer.tokenizer_model=" + tok.string()}),
      dir / "run");
  const fs::path copy = dir / "ck/iter_0000003/additional_chat_templates/tool_use.jinja";
  std::ifstream in(copy);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), files[3].second);
  // One byte changed (same size), then the file gone: each refused, naming the copy.
  std::string changed = files[3].second;
  changed[0] = '#';
  std::ofstream(copy) << changed;
  std::string error = verification_error(copy.parent_path().parent_path());
  EXPECT_NE(error.find("checkpoint file " + copy.string() + " is corrupt"), std::string::npos) << error;
  fs::remove(copy);
  error = verification_error(copy.parent_path().parent_path());
  EXPECT_NE(error.find("checkpoint file " + copy.string() + " is missing"), std::string::npos) << error;
  fs::remove_all(dir);
}

// config.json's bos_token_id is the tokenizer's BOS, over the source's (the vocabulary is the tokenizer's).
TEST(CheckpointExport, BosTokenIdIsTheTokenizersBos) {
  const fs::path dir = test::fresh_test_dir("sg_checkpoint_export");
  const std::string hf = make_hf_folder(dir / "hf", "--max-pos 4096");
  edit_config(hf, "bos_token_id", 3);
  const fs::path tok = dir / "tok";
  write_files(tok, {{"tokenizer.json", R"({"model": {"type": "BPE", "vocab": {"</s>": 0, "<s>": 1, "a": 2}}})"},
                    {"tokenizer_config.json", R"({"eos_token": "</s>", "bos_token": {"content": "<s>"}})"}});
  run(tiny_config({"checkpoint.pretrained_checkpoint=" + hf, "checkpoint.save=" + (dir / "ck").string(),
                   "tokenizer.tokenizer_type=HuggingFaceTokenizer", "tokenizer.tokenizer_model=" + tok.string()}),
      dir / "run");
  const nlohmann::json exported = read_json(dir / "ck/iter_0000002/config.json");
  EXPECT_EQ(exported["bos_token_id"], 1) << exported.dump();
  EXPECT_EQ(exported["eos_token_id"], 0) << exported.dump();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace sg
