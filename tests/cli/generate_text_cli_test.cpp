// The text `stepgraph generate` prints (the real binary, CPU decoder, tiny random models):
//   * SentencePiece-style tokenizers (a Unigram model with a Metaspace pre-tokenizer and decoder, as T5 and
//     Mistral have; and Llama 2's normalizer + Replace/ByteFallback/Fuse/Strip decoder) keep the space between the
//     prompt and the generated text: on screen (streamed in chunks), in --json "texts", for a batch and for
//     --prompt-tokens. Every piece of these vocabularies starts with "▁", so the expected text is " " + the
//     piece of each generated token;
//   * a byte-level BPE tokenizer (tools/train_tokenizer.py) prints what it printed before: the generated tokens
//     decoded on their own, after the prompt; all of it, on screen too (for "The old river" this random model
//     generates a NUL character, where printf's %s used to end the printed text);
//   * a --prompt that is not UTF-8 is a usage error (status 2) naming the byte offset, before any file is read.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "process_util.h"

namespace {

namespace fs = std::filesystem;
using sg::test::run_command;
using sg::test::shell_quote;

const std::string kSource = STEPGRAPH_SOURCE_DIR;
// The words of the SentencePiece vocabularies: ids 0-2 are <unk>, <s>, </s> (special), id 3 + i is "▁" + kWords[i].
const std::vector<std::string> kWords = {"The", "river", "156m", "flour", "old", "a",     "small",
                                         "mill", "ran",  "by",   "the",   "water", "caf\xC3\xA9"};

struct Result {
  int rc = -1;
  std::string out;
};
// stdout only unless `merge`.
Result stepgraph(const std::string& args, bool merge = false) {
  const auto r = sg::test::run_command(shell_quote(STEPGRAPH_BIN) + " " + args + (merge ? " 2>&1" : " 2>/dev/null"));
  return {r.exit_code, r.output};
}

// The Python that writes a SentencePiece-style tokenizer folder: OUT STYLE (metaspace or llama2).
const char* kMakeTokenizer = R"PY(
import json, os, sys
from tokenizers import Tokenizer, AddedToken, decoders, models, normalizers, pre_tokenizers
out, style, words = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
vocab = [("<unk>", 0.0), ("<s>", 0.0), ("</s>", 0.0)] + [("\u2581" + w, -1.0 - 0.1 * i) for i, w in enumerate(words)]
tok = Tokenizer(models.Unigram(vocab, unk_id=0, byte_fallback=False))
if style == "metaspace":
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Metaspace()
else:  # Llama 2's tokenizer.json
    tok.normalizer = normalizers.Sequence([normalizers.Prepend("\u2581"), normalizers.Replace(" ", "\u2581")])
    tok.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse(),
                                     decoders.Strip(" ", 1, 0)])
tok.add_special_tokens([AddedToken(t, special=True) for t in ("<unk>", "<s>", "</s>")])
os.makedirs(out, exist_ok=True)
tok.save(os.path.join(out, "tokenizer.json"))
with open(os.path.join(out, "tokenizer_config.json"), "w") as f:
    json.dump({"eos_token": "</s>"}, f)
ids = tok.encode("The river").ids
assert tok.decode(ids) == "The river", tok.decode(ids)
assert tok.decode([5, 6]) == "156m flour", "the decoder drops the leading space of a decode"
)PY";

class GenerateText : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("sg_generate_text_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    std::ofstream(dir_ / "make_tokenizer.py") << kMakeTokenizer;
    const nlohmann::json words = kWords;
    for (const char* style : {"metaspace", "llama2"}) {
      const std::string out = (dir_ / style).string();
      auto r = run_command("python3 " + shell_quote((dir_ / "make_tokenizer.py").string()) + " " + shell_quote(out) +
                           " " + style + " " + shell_quote(words.dump()) + " 2>&1");
      ASSERT_EQ(r.exit_code, 0) << r.output;
      r = run_command("python3 " + kSource + "/tests/checkpoint/make_hf_llama.py --vocab " +
                      std::to_string(3 + kWords.size()) + " --hidden 64 --heads 4 --kv-heads 2 --ffn 96 --out " +
                      shell_quote(out) + " 2>&1");
      ASSERT_EQ(r.exit_code, 0) << r.output;
    }
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }

  static nlohmann::json generate_json(const std::string& folder, const std::string& flags) {
    const Result r = stepgraph("generate " + shell_quote(folder) + " --cpu --json " + flags);
    EXPECT_EQ(r.rc, 0) << r.out;
    return r.rc == 0 ? nlohmann::json::parse(r.out) : nlohmann::json::object();
  }

  // " " + the word of each generated token (the special ones have no text).
  static std::string expected_text(const nlohmann::json& tokens) {
    std::string text;
    for (const auto& t : tokens) {
      const int id = t.get<int>();
      if (id >= 3) text += " " + kWords.at(static_cast<size_t>(id - 3));
    }
    return text;
  }

  static fs::path dir_;
};
fs::path GenerateText::dir_;

TEST_F(GenerateText, SentencePieceKeepsTheSpaceAfterThePrompt) {
  for (const char* style : {"metaspace", "llama2"}) {
    SCOPED_TRACE(style);
    const std::string model = (dir_ / style).string();
    // 40 tokens: the stream prints three chunks of 16 steps, each what decode(prompt + generated) adds.
    const std::string flags = "--prompt 'The river' --max-new-tokens 40 --ignore-eos";
    const auto j = generate_json(model, flags);
    ASSERT_EQ(j["tokens"].size(), 1u) << j.dump();
    const std::string text = expected_text(j["tokens"][0]);
    ASSERT_FALSE(text.empty()) << j.dump();
    EXPECT_EQ(j["texts"][0], text) << "the space after the prompt is kept";
    const Result screen = stepgraph("generate " + shell_quote(model) + " --cpu " + flags);
    ASSERT_EQ(screen.rc, 0) << screen.out;
    EXPECT_EQ(screen.out, "The river" + text + "\n");
    // stdout and stderr into one pipe (`2>&1 | tee log`): the streamed text's line ends before the report starts.
    const Result merged = stepgraph("generate " + shell_quote(model) + " --cpu " + flags, /*merge=*/true);
    ASSERT_EQ(merged.rc, 0) << merged.out;
    EXPECT_EQ(merged.out.rfind("The river" + text + "\n", 0), 0u) << merged.out;

    // A batch (printed at the end) and --prompt-tokens (no prompt echoed) give the same texts.
    const auto batch =
        generate_json(model, "--prompt 'The river' --prompt 'a small mill ran by' --max-new-tokens 5 --ignore-eos");
    ASSERT_EQ(batch["texts"].size(), 2u) << batch.dump();
    for (size_t b = 0; b < 2; ++b) EXPECT_EQ(batch["texts"][b], expected_text(batch["tokens"][b])) << b;
    const Result printed = stepgraph("generate " + shell_quote(model) +
                                     " --cpu --prompt 'The river' --prompt 'a small mill ran by' --max-new-tokens 5 "
                                     "--ignore-eos");
    EXPECT_EQ(printed.out, "--- sequence 1\nThe river" + batch["texts"][0].get<std::string>() +
                               "\n--- sequence 2\na small mill ran by" + batch["texts"][1].get<std::string>() + "\n");
    const auto ids = generate_json(model, "--prompt-tokens 3,4 --max-new-tokens 5 --ignore-eos");
    EXPECT_EQ(ids["texts"][0], expected_text(ids["tokens"][0])) << ids.dump();
  }
}

TEST_F(GenerateText, APromptIdOutsideTheTokenizerIsDecodedWithoutIt) {
  // A model whose vocab_size is padded past the tokenizer's: a --prompt-tokens id there has no text, so the
  // generated tokens are decoded on their own (a warning says so), not an error after the generation.
  const std::string model = (dir_ / "padded").string();
  fs::create_directories(model);
  fs::copy_file(dir_ / "metaspace" / "tokenizer.json", model + "/tokenizer.json");
  fs::copy_file(dir_ / "metaspace" / "tokenizer_config.json", model + "/tokenizer_config.json");
  const auto r = run_command("python3 " + kSource + "/tests/checkpoint/make_hf_llama.py --vocab 24 --hidden 64 " +
                             "--heads 4 --kv-heads 2 --ffn 96 --out " + shell_quote(model) + " 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const auto j = generate_json(model, "--prompt-tokens 3,20 --max-new-tokens 6 --ignore-eos");
  ASSERT_EQ(j["texts"].size(), 1u) << j.dump();
  const std::string text = expected_text(j["tokens"][0]);
  EXPECT_EQ(j["texts"][0], text.empty() ? text : text.substr(1)) << "decoded alone: the decoder drops the space";
  const Result warned = stepgraph("generate " + shell_quote(model) + " --cpu --prompt-tokens 3,20 --max-new-tokens 6 "
                                  "--ignore-eos", true);
  EXPECT_EQ(warned.rc, 0) << warned.out;
  EXPECT_NE(warned.out.find("prompt 1 has token id 20, outside the tokenizer's 16 tokens"), std::string::npos)
      << warned.out;
}

TEST_F(GenerateText, ByteLevelTextIsUnchanged) {
  // tools/train_tokenizer.py's byte-level BPE: the text is the generated tokens decoded on their own, as before.
  const std::string model = (dir_ / "bytelevel").string();
  auto r = run_command("python3 " + kSource + "/tools/train_tokenizer.py --input " + kSource +
                       "/tests/data/public_domain_sample.jsonl --vocab-size 300 --output " + shell_quote(model) +
                       " 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  r = run_command("python3 " + kSource + "/tests/checkpoint/make_hf_llama.py --vocab 320 --hidden 64 --heads 4 " +
                  "--kv-heads 2 --ffn 96 --std 0.3 --out " + shell_quote(model) + " 2>&1");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  for (const std::string prompt : {"The old river", "caf\xC3\xA9 au lait"}) {
    SCOPED_TRACE(prompt);
    const std::string flags = "--prompt " + shell_quote(prompt) + " --max-new-tokens 40 --ignore-eos";
    const auto j = generate_json(model, flags);
    ASSERT_EQ(j["tokens"].size(), 1u) << j.dump();
    const auto decoded = run_command(
        "python3 -c 'import sys, json; from tokenizers import Tokenizer; "
        "t = Tokenizer.from_file(sys.argv[1]); sys.stdout.write(json.dumps(t.decode(json.loads(sys.argv[2]))))' " +
        shell_quote(model + "/tokenizer.json") + " " + shell_quote(j["tokens"][0].dump()));
    ASSERT_EQ(decoded.exit_code, 0) << decoded.output;
    const std::string alone = nlohmann::json::parse(decoded.output).get<std::string>();
    EXPECT_EQ(j["texts"][0], alone);
    const Result screen = stepgraph("generate " + shell_quote(model) + " --cpu " + flags);
    ASSERT_EQ(screen.rc, 0) << screen.out;
    EXPECT_EQ(screen.out, prompt + alone + "\n");
  }
}

TEST_F(GenerateText, APromptThatIsNotUtf8IsAUsageError) {
  // The folder does not exist: the prompt is refused before anything is read.
  const std::string missing = (dir_ / "nope").string();
  Result r = stepgraph("generate " + shell_quote(missing) + " --cpu --prompt \"$(printf 'caf\\351')\"", true);
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("byte 3 (0xE9) is not valid UTF-8"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("caf\\xE9"), std::string::npos) << "the byte shown escaped:\n" << r.out;
  EXPECT_EQ(r.out.find("no such directory"), std::string::npos) << r.out;
  r = stepgraph("generate " + shell_quote(missing) +
                    " --cpu --prompt ok --prompt \"$(printf '\\303\\251t\\303')\"",
                true);
  EXPECT_EQ(r.rc, 2) << r.out;
  EXPECT_NE(r.out.find("(prompt 2)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("byte 3 (0xC3)"), std::string::npos) << r.out;
  // UTF-8 prompts run.
  r = stepgraph("generate " + shell_quote((dir_ / "metaspace").string()) +
                " --cpu --prompt 'caf\xC3\xA9' --max-new-tokens 2 --ignore-eos");
  EXPECT_EQ(r.rc, 0) << r.out;
  EXPECT_EQ(r.out.rfind("caf\xC3\xA9 ", 0), 0u) << r.out;
}

}  // namespace
