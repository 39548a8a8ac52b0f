// What a saved checkpoint's Hugging Face files keep of the run's inputs, on the CPU backend, in process:
//   * fine-tuned from a Hugging Face folder (checkpoint.pretrained_checkpoint) without a tokenizer, config.json
//     keeps the source's context (max_position_embeddings, not the seq_length trained) and its bos/eos ids as
//     written; rope_scaling's original context is an integer, as transformers requires; from scratch the
//     context is seq_length and there are no special ids;
//   * with a tokenizer, every file transformers' AutoTokenizer reads (chat_template.jinja included) is copied
//     byte for byte with its checksum in train_state.json, and eos_token_id is the tokenizer's EOD.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint/file_checksum.h"
#include "config/config.h"
#include "process_util.h"
#include "test_dir.h"
#include "test_util.h"
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
      {"vocab.json", R"({"<|endoftext|>": 0, "a": 1, "b": 2})"},
      {"merges.txt", "#version: 0.2\n"}};
  for (const auto& [name, text] : files) std::ofstream(tok / name) << text;
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
  fs::remove_all(dir);
}

}  // namespace
}  // namespace sg
