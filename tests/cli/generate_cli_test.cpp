// `stepgraph generate` through the real binary on the CPU reference decoder (--cpu): a Hugging Face
// folder (tests/checkpoint/make_hf_llama.py) with a tokenizer trained by tools/train_tokenizer.py
// copied in, a checkpoint trained by `stepgraph train --cpu` on text preprocessed with
// tools/preprocess_data.py, and a hybrid MoE checkpoint (Nemotron 3's layer kinds) trained on mock data.
//   * greedy output is deterministic and equals the CPU decoder run in process on the same weights
//     and prompt tokens; the printed text starts with the prompt and the timing line reports tokens/s;
//   * sampling repeats with the same --seed and changes with another;
//   * config.json's eos_token_id stops the generation (the EOS included), --ignore-eos does not; a
//     trained checkpoint's config.json names its tokenizer's EOD as eos_token_id and its bos_token as
//     bos_token_id (tools/train_tokenizer.py names <|endoftext|> for both, GPT-2's convention);
//   * a checkpoint whose file no longer has the CRC-32 train_state.json recorded is refused by generate and by
//     train's checkpoint.pretrained_checkpoint, as checkpoint.load refuses it; NaN weights are refused naming
//     the tensor and element;
//   * --prompt-tokens runs without a tokenizer; errors name what to fix: no tokenizer.json, a damaged one (its
//     own error, not "no tokenizer.json"), Python without `tokenizers`, a token outside the vocabulary, a
//     missing folder, a file given as the folder; a bad flag (--temperature,
//     --top-p, --top-k, --max-new-tokens, --prompt-tokens, --seed out of range, top-k/top-p without sampling,
//     --profile with --cpu) is a usage error (status 2) before any file is read; --profile without a GPU is refused.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "checkpoint/hf_import.h"
#include "cuda/device.h"
#include "model/cpu_decoder.h"
#include "model/layer_registry.h"
#include "process_util.h"

namespace {

namespace fs = std::filesystem;
using sg::test::run_command;
using sg::test::shell_quote;

const std::string kSource = STEPGRAPH_SOURCE_DIR;

struct Result {
  int rc = -1;
  std::string out;
};
// `args` is a shell fragment; stderr merged unless json (then stdout only).
Result stepgraph(const std::string& args, bool json = false, const std::string& env = "") {
  const auto r = run_command(env + " " + shell_quote(STEPGRAPH_BIN) + " " + args + (json ? " 2>/dev/null" : " 2>&1"));
  return {r.exit_code, r.output};
}

std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

class GenerateCli : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("sg_generate_cli_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    const auto tok = run_command("python3 " + kSource + "/tools/train_tokenizer.py --input " + kSource +
                                 "/tests/data/public_domain_sample.jsonl --vocab-size 300 --output " +
                                 shell_quote((dir_ / "tok").string()) + " 2>&1");
    ASSERT_EQ(tok.exit_code, 0) << tok.output;
    make_model("hf", "");
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }

  // A HF folder with the tokenizer files copied in.
  static std::string make_model(const std::string& name, const std::string& args) {
    const std::string out = (dir_ / name).string();
    const auto r =
        run_command("python3 " + kSource + "/tests/checkpoint/make_hf_llama.py --vocab 320 --hidden 64 " +
                    "--heads 4 --kv-heads 2 --ffn 96 --std 0.3 --out " + shell_quote(out) + " " + args + " 2>&1");
    EXPECT_EQ(r.exit_code, 0) << r.output;
    for (const auto& f : fs::directory_iterator(dir_ / "tok")) fs::copy_file(f.path(), out / f.path().filename());
    return out;
  }

  static nlohmann::json generate_json(const std::string& folder, const std::string& flags) {
    const Result r = stepgraph("generate " + shell_quote(folder) + " --cpu --json " + flags, true);
    EXPECT_EQ(r.rc, 0) << r.out;
    return r.rc == 0 ? nlohmann::json::parse(r.out) : nlohmann::json::object();
  }

  static fs::path dir_;
};
fs::path GenerateCli::dir_;

TEST_F(GenerateCli, GreedyIsDeterministicAndEqualsTheDecoder) {
  const std::string hf = (dir_ / "hf").string();
  const auto a = generate_json(hf, "--prompt 'The old river' --max-new-tokens 12 --ignore-eos");
  const auto b = generate_json(hf, "--prompt 'The old river' --max-new-tokens 12 --ignore-eos");
  ASSERT_TRUE(a.contains("tokens"));
  EXPECT_EQ(a["tokens"], b["tokens"]);
  EXPECT_EQ(a["tokens"][0].size(), 12u);
  EXPECT_EQ(a["texts"].size(), 1u);
  EXPECT_GT(a["decode_tokens_per_s"].get<double>(), 0.0);

  const auto prompt = a["prompt_tokens"][0].get<std::vector<int32_t>>();
  ASSERT_FALSE(prompt.empty());
  const auto config = sg::checkpoint::read_hf_config(hf);
  std::vector<float> weights;
  sg::checkpoint::load_hf_weights(hf, sg::model::model_layout(config.spec), weights,
                                  sg::checkpoint::WeightSource::model, "test");
  sg::model::DecodeSpec d;
  d.max_prompt_tokens = static_cast<int64_t>(prompt.size());
  d.max_new_tokens = 12;
  sg::model::CpuDecoder decoder(config.spec, weights, d);
  decoder.start({prompt});
  decoder.decode(11);
  EXPECT_EQ(a["tokens"][0].get<std::vector<int32_t>>(), decoder.generated()[0]);

  const Result text = stepgraph("generate " + shell_quote(hf) + " --cpu --prompt 'The old river' --max-new-tokens 5");
  ASSERT_EQ(text.rc, 0) << text.out;
  EXPECT_EQ(text.out.rfind("The old river", 0), 0u) << text.out;
  EXPECT_NE(text.out.find("tokens/s"), std::string::npos) << text.out;
  EXPECT_NE(text.out.find("CPU fp32 reference decoder"), std::string::npos) << text.out;
}

TEST_F(GenerateCli, SamplingFollowsTheSeed) {
  const std::string hf = (dir_ / "hf").string();
  const std::string flags =
      "--prompt 'A small' --max-new-tokens 16 --ignore-eos --temperature 1.2 --top-k 40 --top-p 0.95";
  const auto a = generate_json(hf, flags + " --seed 3");
  EXPECT_EQ(a["tokens"], generate_json(hf, flags + " --seed 3")["tokens"]);
  EXPECT_NE(a["tokens"], generate_json(hf, flags + " --seed 4")["tokens"]);
}

TEST_F(GenerateCli, EosFromConfigStopsTheSequence) {
  const std::string hf = (dir_ / "hf").string();
  const auto full = generate_json(hf, "--prompt-tokens 5,6,7 --max-new-tokens 10 --ignore-eos");
  const auto tokens = full["tokens"][0].get<std::vector<int32_t>>();
  ASSERT_EQ(tokens.size(), 10u);
  // A folder with the same weights whose eos_token_id is the 4th generated token. The tokenizer's
  // eos (<|endoftext|>, id 0) stops a sequence too.
  const std::string eos = make_model("hf_eos", "--eos " + std::to_string(tokens[3]));
  const auto stopped = generate_json(eos, "--prompt-tokens 5,6,7 --max-new-tokens 10");
  const auto got = stopped["tokens"][0].get<std::vector<int32_t>>();
  const size_t first = static_cast<size_t>(
      std::find_if(tokens.begin(), tokens.end(), [&](int32_t t) { return t == tokens[3] || t == 0; }) - tokens.begin());
  EXPECT_EQ(got, std::vector<int32_t>(tokens.begin(), tokens.begin() + first + 1));
  // The decode count is the tokens kept after the prefill's first one, not every step's (one chunk may run past the
  // EOS); the steps run are counted apart.
  EXPECT_EQ(stopped["decode_tokens"].get<int64_t>(), static_cast<int64_t>(got.size()) - 1) << stopped.dump();
  EXPECT_GE(stopped["decode_steps"].get<int64_t>(), static_cast<int64_t>(got.size()) - 1) << stopped.dump();
  EXPECT_EQ(full["decode_tokens"].get<int64_t>(), 9) << full.dump();
  EXPECT_EQ(full["decode_steps"].get<int64_t>(), 9) << full.dump();
  EXPECT_EQ(generate_json(eos, "--prompt-tokens 5,6,7 --max-new-tokens 10 --ignore-eos")["tokens"], full["tokens"]);
}

// Ctrl-C (SIGINT to the process group, as a terminal sends it) ends the decoding between chunks: the tokens and
// the text so far are printed as JSON, the tokenizer child survived to decode them, and the status is 130.
TEST_F(GenerateCli, AStopSignalPrintsWhatWasGenerated) {
  const std::string out = (dir_ / "stopped.json").string();
  const std::string err = (dir_ / "stopped.err").string();
  // setsid: generate leads its own process group, so `kill -INT -PID` reaches the group like a terminal's ^C (and
  // a run that ignored it is killed after a minute).
  const auto r = run_command(
      "setsid " + shell_quote(STEPGRAPH_BIN) + " generate " + shell_quote((dir_ / "hf").string()) +
      " --cpu --json --prompt 'A small' --ignore-eos --max-new-tokens 200000 >" + shell_quote(out) + " 2>" +
      shell_quote(err) +
      " & pid=$!; sleep 4; kill -INT -$pid; (sleep 60; kill -KILL -$pid) >/dev/null 2>&1 & wait $pid; echo rc=$?");
  EXPECT_NE(r.output.find("rc=130"), std::string::npos) << r.output << read_text(err);
  nlohmann::json j;
  ASSERT_NO_THROW(j = nlohmann::json::parse(read_text(out))) << read_text(out) << read_text(err);
  EXPECT_EQ(j["stopped_by_signal"], 2) << j.dump();
  ASSERT_EQ(j["tokens"].size(), 1u);
  EXPECT_GT(j["tokens"][0].size(), 0u);
  EXPECT_LT(j["tokens"][0].size(), 200000u);
  ASSERT_EQ(j["texts"].size(), 1u) << "the tokenizer decoded the text after the signal";
  EXPECT_FALSE(j["texts"][0].get<std::string>().empty());
  EXPECT_NE(read_text(err).find("stopped by SIGINT"), std::string::npos) << read_text(err);
}

TEST_F(GenerateCli, TrainedCheckpointWithItsTokenizer) {
  // text -> tokenizer -> .bin/.idx -> train --cpu -> generate, as the README's "Your own data" runs it.
  const std::string data = (dir_ / "sample").string(), ckpt = (dir_ / "ckpt").string();
  const auto pre = run_command("python3 " + kSource + "/tools/preprocess_data.py --input " + kSource +
                               "/tests/data/public_domain_sample.jsonl --json-keys text --output-prefix " +
                               shell_quote(data) + " --tokenizer-type HuggingFaceTokenizer --tokenizer-model " +
                               shell_quote((dir_ / "tok").string()) + " --append-eod 2>&1");
  ASSERT_EQ(pre.exit_code, 0) << pre.output;
  const Result train =
      stepgraph("train llama/tiny --cpu --plain --run-dir " + shell_quote((dir_ / "run").string()) +
                " dataset.mock=false dataset.data_path=[" + data + "_text_document]" +
                " model.vocab_size=320 model.num_layers=2 model.hidden_size=64 "
                "model.ffn_hidden_size=128 model.seq_length=32 dataset.seq_length=32 "
                "train.micro_batch_size=2 train.global_batch_size=2 train.train_iters=3 scheduler.lr_warmup_iters=0 "
                "tokenizer.tokenizer_type=HuggingFaceTokenizer tokenizer.tokenizer_model=" +
                shell_quote((dir_ / "tok").string()) + " checkpoint.save=" + ckpt);
  ASSERT_EQ(train.rc, 0) << train.out;
  // The checkpoint's own tokenizer decodes, and its config.json stops transformers' generate at the EOD
  // token (id 0), not at LlamaConfig's default ids 1 and 2; its BOS is the tokenizer's bos_token (id 0 too).
  std::ifstream config_json(dir_ / "ckpt" / "iter_0000003" / "config.json");
  const auto config = nlohmann::json::parse(config_json);
  EXPECT_EQ(config["eos_token_id"], 0) << config.dump();
  EXPECT_EQ(config["bos_token_id"], 0) << config.dump();
  const auto r = generate_json(ckpt, "--prompt 'The river' --max-new-tokens 6 --ignore-eos");
  EXPECT_EQ(r["tokens"][0].size(), 6u);
  EXPECT_NE(r["model"].get<std::string>().find("iter_0000003"), std::string::npos) << r.dump();

  // One bit flipped in a copy's weights: refused by generate and by pretrained_checkpoint, naming the file.
  const fs::path copy = dir_ / "ckpt_flipped";
  fs::copy(dir_ / "ckpt" / "iter_0000003", copy);
  for (const char* file : {"model.safetensors", "optimizer_main_params.safetensors"}) {
    std::fstream f(copy / file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(-1, std::ios::end);
    char b = 0;
    f.read(&b, 1);
    b = static_cast<char>(b ^ 0x40);  // an exponent bit of the last (little-endian) value
    f.seekp(-1, std::ios::end);
    f.write(&b, 1);
  }
  Result bad = stepgraph("generate " + shell_quote(copy.string()) + " --cpu --prompt-tokens 1,2,3");
  EXPECT_EQ(bad.rc, 1) << bad.out;
  EXPECT_NE(bad.out.find((copy / "model.safetensors").string() + " is corrupt"), std::string::npos) << bad.out;
  bad = stepgraph("train llama/tiny --cpu --plain --run-dir " + shell_quote((dir_ / "run_flipped").string()) +
                  " dataset.mock=true model.vocab_size=320 model.num_layers=2 model.hidden_size=64 "
                  "model.ffn_hidden_size=128 model.seq_length=32 dataset.seq_length=32 train.micro_batch_size=2 "
                  "train.global_batch_size=2 train.train_iters=1 scheduler.lr_warmup_iters=0 "
                  "checkpoint.pretrained_checkpoint=" +
                  shell_quote(copy.string()));
  EXPECT_EQ(bad.rc, 1) << bad.out;
  EXPECT_NE(bad.out.find((copy / "optimizer_main_params.safetensors").string() + " is corrupt"), std::string::npos)
      << bad.out;
  EXPECT_EQ(bad.out.find("step 1"), std::string::npos) << "refused before training:\n" << bad.out;
}

// A model with Nemotron 3's layer kinds (Mamba, MoE with sigmoid routing, an expert bias, squared-ReLU and
// shared experts, attention without RoPE), trained by `stepgraph train --cpu` and saved as a NemotronH
// folder, generates on the CPU decoder: the tokens the decoder in process gives on the same weights.
TEST_F(GenerateCli, HybridMoeCheckpointGenerates) {
  const std::string ckpt = (dir_ / "ckpt_hybrid").string();
  const Result train = stepgraph(
      "train hybrid/tiny_hybrid --cpu --plain --run-dir " + shell_quote((dir_ / "run_hybrid").string()) +
      " dataset.mock=true model.hybrid_override_pattern=ME*- model.num_layers=4 model.hidden_size=64 "
      "model.num_attention_heads=2 model.num_query_groups=2 model.ffn_hidden_size=96 model.vocab_size=128 "
      "model.mamba_head_dim=64 model.mamba_num_groups=2 model.mamba_state_dim=16 model.num_moe_experts=4 "
      "model.moe_router_topk=2 model.moe_ffn_hidden_size=32 model.moe_shared_expert_intermediate_size=48 "
      "model.moe_router_score_function=sigmoid model.moe_router_enable_expert_bias=true "
      "model.moe_router_topk_scaling_factor=2.5 model.seq_length=16 dataset.seq_length=16 train.micro_batch_size=2 "
      "train.global_batch_size=2 train.train_iters=2 scheduler.lr_warmup_iters=0 checkpoint.save=" +
      shell_quote(ckpt));
  ASSERT_EQ(train.rc, 0) << train.out;
  const auto r = generate_json(ckpt, "--prompt-tokens 5,6,7,8,9 --max-new-tokens 10 --ignore-eos");
  ASSERT_TRUE(r.contains("tokens")) << r.dump();
  EXPECT_NE(r["backend"].get<std::string>().find("ME*-"), std::string::npos) << r.dump();

  const std::string folder = (fs::path(ckpt) / "iter_0000002").string();
  const auto config = sg::checkpoint::read_hf_config(folder);
  EXPECT_EQ(config.architecture, "NemotronHForCausalLM");
  std::vector<float> weights;
  sg::checkpoint::load_hf_weights(folder, sg::model::model_layout(config.spec), weights,
                                  sg::checkpoint::WeightSource::model, "test");
  sg::model::DecodeSpec d;
  d.max_prompt_tokens = 5;
  d.max_new_tokens = 10;
  sg::model::CpuDecoder decoder(config.spec, weights, d);
  decoder.start({{5, 6, 7, 8, 9}});
  decoder.decode(9);
  EXPECT_EQ(r["tokens"][0].get<std::vector<int32_t>>(), decoder.generated()[0]);
}

// A Mistral folder (MistralForCausalLM: Llama's tensors, attention within sliding_window) generates while the prompt
// and the new tokens fit its window, where its attention is stepgraph's fully causal one; a request past the window
// is refused before any decoding, naming the window, the folder and the flag to lower.
TEST_F(GenerateCli, AMistralFolderGeneratesWithinItsSlidingWindow) {
  const std::string folder = (dir_ / "mistral").string();
  ASSERT_EQ(run_command("python3 " + kSource + "/tests/checkpoint/make_hf_llama.py --vocab 320 --mistral 8 --out " +
                        shell_quote(folder) + " >/dev/null")
                .exit_code,
            0);
  const nlohmann::json fits = generate_json(folder, "--prompt-tokens 1,2,3 --max-new-tokens 5 --ignore-eos");
  ASSERT_TRUE(fits.contains("tokens"));
  EXPECT_EQ(fits["tokens"][0].size(), 5u);
  Result r = stepgraph("generate " + folder + " --cpu --prompt-tokens 1,2,3 --max-new-tokens 6");
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_NE(r.out.find("prompt + --max-new-tokens = 9 positions exceed MistralForCausalLM's sliding_window = 8 (" +
                       folder + "/config.json)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("lower --max-new-tokens to 8 positions in all"), std::string::npos) << r.out;
}

TEST_F(GenerateCli, ErrorsNameTheFix) {
  const std::string bare = (dir_ / "bare").string();
  ASSERT_EQ(run_command("python3 " + kSource + "/tests/checkpoint/make_hf_llama.py --vocab 320 --out " +
                        shell_quote(bare) + " >/dev/null")
                .exit_code,
            0);
  Result r = stepgraph("generate " + bare + " --cpu --prompt hello");
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_EQ(r.out.rfind("error: ", 0), 0u) << "only the error, no echoed prompt before it:\n" << r.out;
  EXPECT_NE(r.out.find("no tokenizer.json"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--tokenizer"), std::string::npos) << r.out;
  r = stepgraph("generate " + bare + " --cpu --prompt-tokens 1,2,3 --max-new-tokens 3");  // no tokenizer needed
  EXPECT_EQ(r.rc, 0) << r.out;
  r = stepgraph("generate " + bare + " --cpu --prompt-tokens 1,,2");  // not silently 1,2
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("an empty id between commas"), std::string::npos) << r.out;
  r = stepgraph("generate " + bare + " --cpu --prompt-tokens 1,2,320");
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_NE(r.out.find("--prompt-tokens: id 320 is outside the model's vocabulary"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("vocab_size 320, so ids run from 0 to 319"), std::string::npos) << r.out;
  // --tokenizer names itself, whether the folder is missing or has no tokenizer.json.
  r = stepgraph("generate " + bare + " --cpu --prompt hello --tokenizer " + bare);
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_NE(r.out.find("--tokenizer " + bare + ": no tokenizer.json there"), std::string::npos) << r.out;
  r = stepgraph("generate " + bare + " --cpu --prompt hello --tokenizer " + bare + "/nope");
  EXPECT_NE(r.out.find("--tokenizer " + bare + "/nope: no such folder"), std::string::npos) << r.out;
  // A folder given relative to the working directory: its parent is named, not "".
  r = stepgraph("generate bare --cpu --prompt hello", false, "cd " + shell_quote(dir_.string()) + " &&");
  EXPECT_NE(r.out.find("no tokenizer.json in " + bare + " or " + dir_.string() + ":"), std::string::npos) << r.out;
  // Flags take one value each: an unquoted prompt's words, or the checkpoint after the flag, are not more prompts.
  r = stepgraph("generate --cpu --prompt-tokens 1,2 " + bare + " --max-new-tokens 2 --json");
  EXPECT_EQ(r.rc, 0) << r.out;
  r = stepgraph("generate " + bare + " --cpu --prompt-tokens 5 6 7");
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("not expected: 7 6"), std::string::npos) << r.out;
  // Mistakes in the prompt are found before the weights are read: a damaged weights file does not hide them.
  const std::string truncated = (dir_ / "truncated_weights").string();
  fs::copy(bare, truncated);
  fs::resize_file(truncated + "/model.safetensors", fs::file_size(truncated + "/model.safetensors") / 2);
  r = stepgraph("generate " + truncated + " --cpu --prompt-tokens 1,2,320");
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_NE(r.out.find("--prompt-tokens: id 320"), std::string::npos) << r.out;
  r = stepgraph("generate " + truncated + " --cpu --prompt hello");
  EXPECT_NE(r.out.find("no tokenizer.json"), std::string::npos) << r.out;
  r = stepgraph("generate " + truncated + " --cpu --prompt-tokens 1,2,3");  // and the file is still checked
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_NE(r.out.find("model.safetensors"), std::string::npos) << r.out;
  // Usage errors exit with status 2, before any file is read (the folder need not exist).
  const std::string missing = (dir_ / "nope").string();
  for (const auto& [flags, names] : std::vector<std::pair<std::string, std::string>>{
           {"--prompt-tokens 1 --temperature -1", "--temperature"},
           {"--prompt-tokens 1 --temperature 1e-39", "give 0 for greedy decoding"},
           {"--prompt ''", "an empty prompt"},
           {"--prompt hi --prompt ''", "(prompt 2) an empty prompt"},
           {"--prompt-tokens 1 --top-p 2", "--top-p"},
           {"--prompt-tokens 1 --top-k -3", "--top-k"},
           {"--prompt-tokens 1 --max-new-tokens 0", "--max-new-tokens"},
           {"--prompt-tokens 1,x", "--prompt-tokens"},
           {"--prompt-tokens 1 --prompt hi", "not both"},
           {"--prompt-tokens 1 --seed -1", "--seed: '-1'"},
           {"--prompt-tokens 1 --seed 18446744073709551616", "--seed"},
           {"--prompt-tokens 1 --top-k 5", "--temperature T > 0"},
           {"--prompt-tokens 1 --profile", "--cpu runs the CPU decoder"}}) {
    r = stepgraph("generate " + missing + " --cpu " + flags);
    EXPECT_EQ(r.rc, 2) << flags << "\n" << r.out;
    EXPECT_NE(r.out.find(names), std::string::npos) << flags << "\n" << r.out;
    EXPECT_EQ(r.out.find("no such directory"), std::string::npos) << flags << "\n" << r.out;
    EXPECT_EQ(r.out.find(".cpp:"), std::string::npos) << "a flag's error names no source line:\n" << r.out;
  }
  // --profile times GPU kernels: without a GPU it is refused, not silently ignored.
  if (sg::cuda::device_count() == 0) {
    r = stepgraph("generate " + bare + " --prompt-tokens 1,2 --max-new-tokens 2 --profile");
    EXPECT_EQ(r.rc, 1) << r.out;
    EXPECT_NE(r.out.find("--profile times the GPU decoder's kernels, and this machine has no GPU"), std::string::npos)
        << r.out;
  }
  // A KV cache larger than the host's memory: refused before allocating, not std::bad_alloc or the OOM killer.
  r = stepgraph("generate " + bare + " --cpu --prompt-tokens 1 --max-new-tokens 1000000000");
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_NE(r.out.find("KV cache"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("lower --max-new-tokens"), std::string::npos) << r.out;
  r = stepgraph("generate " + (dir_ / "nope").string() + " --cpu --prompt-tokens 1");
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_NE(r.out.find("no such directory"), std::string::npos) << r.out;
  // A model larger than the host: refused before a weight is read (this folder has none), naming both sizes.
  const fs::path huge = dir_ / "huge";
  fs::create_directories(huge);
  std::ofstream(huge / "config.json")
      << R"({"model_type": "llama", "vocab_size": 1000000, "hidden_size": 65536, "intermediate_size": 131072,
             "num_hidden_layers": 64, "num_attention_heads": 512, "num_key_value_heads": 8})";
  r = stepgraph("generate " + huge.string() + " --cpu --prompt-tokens 1");
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_NE(r.out.find("of host memory in fp32"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("model.safetensors"), std::string::npos) << "refused before the weights are looked for:\n"
                                                                << r.out;
  // A NemotronH folder without its weights: the file generate looks for is named.
  const fs::path nemotron = dir_ / "nemotron_h";
  fs::create_directories(nemotron);
  std::ofstream(nemotron / "config.json")
      << R"({"model_type": "nemotron_h", "hybrid_override_pattern": "M*", "vocab_size": 64, "hidden_size": 64,
             "num_attention_heads": 2, "num_key_value_heads": 2, "mamba_num_heads": 2, "n_groups": 2})";
  r = stepgraph("generate " + nemotron.string() + " --cpu --prompt-tokens 1");
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_NE(r.out.find("model.safetensors"), std::string::npos) << r.out;
  r = stepgraph("generate " + bare + " --cpu");
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("--prompt"), std::string::npos) << r.out;
  r = stepgraph("generate " + bare + "/config.json --cpu --prompt-tokens 1");
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_NE(r.out.find("config.json: not a directory"), std::string::npos) << r.out;
  // A damaged tokenizer.json is an error with its own message, even where a tokenizer is optional.
  const std::string damaged = (dir_ / "damaged_tokenizer").string();
  fs::copy(bare, damaged);
  std::ofstream(damaged + "/tokenizer.json") << "{\"version\": \"1.0\", broken";
  r = stepgraph("generate " + damaged + " --cpu --prompt-tokens 1,2,3 --max-new-tokens 2");
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_NE(r.out.find(damaged + "/tokenizer.json"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("no tokenizer.json"), std::string::npos) << r.out;
  // NaN weights: refused naming the tensor and its first bad element, not generated as token 0.
  const std::string nan = (dir_ / "nan").string();
  ASSERT_EQ(run_command("python3 " + kSource + "/tests/checkpoint/make_hf_llama.py --vocab 320 --break nan --out " +
                        shell_quote(nan) + " >/dev/null")
                .exit_code,
            0);
  r = stepgraph("generate " + nan + " --cpu --prompt-tokens 1,2,3 --max-new-tokens 2");
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_NE(r.out.find("tensor model.layers.1.mlp.down_proj.weight element 7 is nan"), std::string::npos) << r.out;
  // Python without site-packages has no `tokenizers`: the server's message comes through.
  const std::string wrapper = (dir_ / "python_without_packages").string();
  std::ofstream(wrapper) << "#!/bin/sh\nexec python3 -S \"$@\"\n";
  fs::permissions(wrapper, fs::perms::owner_all);
  r = stepgraph("generate " + (dir_ / "hf").string() + " --cpu --prompt hello", false, "STEPGRAPH_PYTHON=" + wrapper);
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_NE(r.out.find("tokenizers"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("scripts/setup.sh"), std::string::npos) << r.out;
  r = stepgraph("generate " + (dir_ / "hf").string() + " --cpu --prompt hello", false,
                "STEPGRAPH_PYTHON=/nonexistent/python3");
  EXPECT_EQ(r.rc, 1) << r.out;
  EXPECT_NE(r.out.find("STEPGRAPH_PYTHON"), std::string::npos) << r.out;
}

}  // namespace
