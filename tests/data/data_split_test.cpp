// dataset.split: Megatron's document-level train/valid/test split (the shares, the rounding of
// _get_split_indices, the ranges read), the "missing dataset" message, and the tokenizer folder reader
// (vocabulary size, EOD and BOS ids, the files a checkpoint copies).
#include <gtest/gtest.h>

#include <array>
#include <filesystem>
#include <functional>
#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/blended_dataset.h"
#include "data/dataset_split.h"
#include "data/hf_tokenizer.h"
#include "data/indexed_dataset.h"
#include "test_dir.h"
#include "test_util.h"

namespace sg::data {
namespace {

namespace fs = std::filesystem;

using test::thrown_message;

TEST(DatasetSplit, ParsesAndNormalisesLikeMegatron) {
  const SplitShares s = parse_split("969,30,1");
  EXPECT_DOUBLE_EQ(s[0], 0.969);
  EXPECT_DOUBLE_EQ(s[1], 0.03);
  EXPECT_DOUBLE_EQ(s[2], 0.001);
  const SplitShares two = parse_split(" 99 , 1 ");  // missing parts are 0
  EXPECT_DOUBLE_EQ(two[0], 0.99);
  EXPECT_DOUBLE_EQ(two[1], 0.01);
  EXPECT_DOUBLE_EQ(two[2], 0.0);
  EXPECT_DOUBLE_EQ(parse_split("1")[0], 1.0);
  for (const char* bad : {"", "a,b", "1,2,3,4", "-1,2", "0,0,0", "1,,2", "1e999"}) {
    EXPECT_NE(thrown_message([&] { parse_split(bad); }).find("dataset.split"), std::string::npos) << bad;
  }
}

// Expected boundaries computed with Megatron's own formula (Python: round half to even).
TEST(DatasetSplit, DocumentBoundsFollowMegatronsRounding) {
  using B = std::array<uint64_t, 4>;
  EXPECT_EQ(split_document_bounds(parse_split("969,30,1"), 1000), (B{0, 969, 999, 1000}));
  EXPECT_EQ(split_document_bounds(parse_split("969,30,1"), 102), (B{0, 99, 102, 102}));
  EXPECT_EQ(split_document_bounds(parse_split("90,10,0"), 102), (B{0, 92, 102, 102}));
  EXPECT_EQ(split_document_bounds(parse_split("1,1,1"), 10), (B{0, 4, 7, 10}));
  EXPECT_EQ(split_document_bounds(parse_split("1,1,1"), 2), (B{0, 0, 1, 2}));
  EXPECT_EQ(split_document_bounds(parse_split("5,5"), 5), (B{0, 3, 5, 5}));  // round(2.5) = 2, then shifted
  EXPECT_EQ(split_document_bounds(parse_split("1,1"), 3), (B{0, 1, 3, 3}));  // round(1.5) = 2, 2+2 = 4 -> -1
  EXPECT_EQ(split_document_bounds(parse_split("1"), 0), (B{0, 0, 0, 0}));
}

class SplitLoaderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = sg::test::fresh_test_dir("sg_split_test");
  }
  void TearDown() override { fs::remove_all(dir_); }

  // 10 documents of 20 tokens; token value = 1000 * document + position: a window tells its documents.
  std::string corpus() {
    const std::string prefix = (dir_ / "c").string();
    IndexedDatasetWriter w(prefix, TokenDtype::int32);
    for (int d = 0; d < 10; ++d) {
      std::vector<int32_t> doc(20);
      for (int i = 0; i < 20; ++i) doc[static_cast<size_t>(i)] = 1000 * d + i;
      w.add_document(doc);
    }
    w.finalize();
    return prefix;
  }

  std::set<int> documents_read(const std::string& prefix, Split split, int samples) {
    DataLoaderOptions o;
    o.data_path = {prefix};
    o.seq_length = 8;
    o.vocab_size = 1 << 20;
    o.split_shares = parse_split("6,3,1");  // documents [0,6) train, [6,9) valid, [9,10) test
    o.split = split;
    DataLoader loader(o);
    std::set<int> docs;
    std::vector<int32_t> window(9);
    for (int i = 0; i < samples; ++i) {
      loader.next(window.data());
      for (const int32_t t : window) docs.insert(t / 1000);
    }
    return docs;
  }

  fs::path dir_;
};

TEST_F(SplitLoaderTest, EachSplitReadsOnlyItsDocuments) {
  const std::string prefix = corpus();
  EXPECT_EQ(documents_read(prefix, Split::train, 200), (std::set<int>{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(documents_read(prefix, Split::valid, 200), (std::set<int>{6, 7, 8}));
  EXPECT_EQ(documents_read(prefix, Split::test, 50), (std::set<int>{9}));
}

TEST_F(SplitLoaderTest, ASplitTooSmallForOneSampleSaysSo) {
  const std::string prefix = corpus();
  DataLoaderOptions o;
  o.data_path = {prefix};
  o.seq_length = 30;  // the test split has 20 tokens
  o.vocab_size = 1 << 20;
  o.split_shares = parse_split("6,3,1");
  o.split = Split::test;
  const std::string message = thrown_message([&] { DataLoader loader(o); });
  EXPECT_NE(message.find("test split: documents [9, 10) of 10"), std::string::npos) << message;
  EXPECT_NE(message.find("dataset.split"), std::string::npos) << message;
}

TEST_F(SplitLoaderTest, AMissingDatasetSaysHowToMakeOne) {
  DataLoaderOptions o;
  o.data_path = {(dir_ / "nothing").string()};
  o.seq_length = 8;
  o.vocab_size = 256;
  const std::string message = thrown_message([&] { DataLoader loader(o); });
  EXPECT_NE(message.find("nothing.idx and "), std::string::npos) << message;
  EXPECT_NE(message.find("stepgraph data synth --out"), std::string::npos) << message;
  EXPECT_NE(message.find("tools/preprocess_data.py"), std::string::npos) << message;
  // The output name of preprocess_data.py is PREFIX_text_document: said when that is what exists.
  IndexedDatasetWriter w((dir_ / "mine_text_document").string(), TokenDtype::uint16);
  w.add_document(std::vector<int32_t>{1, 2, 3});
  w.finalize();
  o.data_path = {(dir_ / "mine").string()};
  EXPECT_NE(thrown_message([&] { DataLoader loader(o); }).find("mine_text_document exists"), std::string::npos);
}

// ---- the tokenizer folder ----

class TokenizerFolderTest : public SplitLoaderTest {
 protected:
  void write(const std::string& name, const std::string& text) {
    std::ofstream(dir_ / name) << text;
  }
};

TEST_F(TokenizerFolderTest, BpeVocabularyPlusAddedTokensAndTheEosOfTokenizerConfig) {
  write("tokenizer.json", R"({"model": {"type": "BPE", "vocab": {"a": 1, "b": 2, "c": 3, "<|endoftext|>": 0}},
      "added_tokens": [{"id": 0, "content": "<|endoftext|>"}, {"id": 7, "content": "<|pad|>"}]})");
  write("tokenizer_config.json", R"({"eos_token": {"content": "<|endoftext|>", "lstrip": false}})");
  write("special_tokens_map.json", R"({"eos_token": "<|pad|>"})");  // tokenizer_config.json wins
  const HfTokenizerInfo info = read_hf_tokenizer(dir_.string());
  EXPECT_EQ(info.vocab_size, 8);  // ids up to 7
  EXPECT_EQ(info.model_tokens, 4);
  EXPECT_EQ(info.added_tokens, 2);
  EXPECT_EQ(info.model_type, "BPE");
  EXPECT_EQ(info.eos_token, "<|endoftext|>");
  EXPECT_EQ(info.eod_id, 0);
  EXPECT_EQ(info.files.size(), 3u);
  EXPECT_NE(info.describe().find("EOD <|endoftext|> = 0"), std::string::npos) << info.describe();
}

TEST_F(TokenizerFolderTest, UnigramListAndEosFromSpecialTokensMap) {
  write("tokenizer.json", R"({"model": {"type": "Unigram", "vocab": [["<unk>", 0], ["</s>", 0], ["x", -1.5]]}})");
  write("special_tokens_map.json", R"({"eos_token": "</s>"})");
  const HfTokenizerInfo info = read_hf_tokenizer(dir_.string());
  EXPECT_EQ(info.vocab_size, 3);
  EXPECT_EQ(info.eod_id, 1);
  EXPECT_EQ(info.files.size(), 2u);
}

TEST_F(TokenizerFolderTest, NoEosMeansNoEod) {
  write("tokenizer.json", R"({"model": {"vocab": {"a": 0, "b": 1}}})");
  const HfTokenizerInfo info = read_hf_tokenizer(dir_.string());
  EXPECT_EQ(info.vocab_size, 2);
  EXPECT_EQ(info.eod_id, -1);
}

// Everything transformers' AutoTokenizer reads goes into checkpoints: without chat_template.jinja (where
// transformers >= 4.47 saves the chat template) a checkpoint's tokenizer would have no chat template, without
// additional_chat_templates/NAME.jinja none of its extra ones.
TEST_F(TokenizerFolderTest, ListsEveryFileTransformersReadsForTheCheckpointCopy) {
  write("tokenizer.json", R"({"model": {"type": "BPE", "vocab": {"a": 0, "</s>": 1}}})");
  write("tokenizer_config.json", R"({"eos_token": "</s>"})");
  const std::set<std::string> copied = {
      "tokenizer.json",     "tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja",
      "chat_template.json", "added_tokens.json",     "tokenizer.model",         "vocab.json",
      "merges.txt"};
  for (const std::string& name : copied) {
    if (!fs::exists(dir_ / name)) write(name, "{}");
  }
  write("README.md", "not the tokenizer's");
  write("config.json", "{}");  // the model's, when the tokenizer lives in a model folder
  HfTokenizerInfo info = read_hf_tokenizer(dir_.string());
  EXPECT_EQ(std::set<std::string>(info.files.begin(), info.files.end()), copied);  // names relative to the folder
  EXPECT_EQ(info.files.size(), copied.size());
  // Extra chat templates are copied too, after the files above and by name.
  fs::create_directories(dir_ / "additional_chat_templates");
  write("additional_chat_templates/tool_use.jinja", "{{ messages }}");
  write("additional_chat_templates/rag.jinja", "{{ documents }}");
  info = read_hf_tokenizer(dir_.string());
  ASSERT_EQ(info.files.size(), copied.size() + 2);
  EXPECT_EQ(info.files[copied.size()], "additional_chat_templates/rag.jinja");
  EXPECT_EQ(info.files[copied.size() + 1], "additional_chat_templates/tool_use.jinja");
  EXPECT_EQ(info.describe().find("additional_chat_templates"), std::string::npos) << info.describe();
}

// transformers reads only regular NAME.jinja files from additional_chat_templates/ and skips anything else without a
// word: such an entry is refused, naming it, so no template a user put there is missing from the checkpoints.
TEST_F(TokenizerFolderTest, RefusesWhatTransformersWouldSkipInAdditionalChatTemplates) {
  write("tokenizer.json", R"({"model": {"type": "BPE", "vocab": {"a": 0}}})");
  const fs::path templates = dir_ / "additional_chat_templates";
  write("additional_chat_templates", "a file, not the folder");
  EXPECT_NE(thrown_message([&] { read_hf_tokenizer(dir_.string()); }).find(templates.string() + " is not a folder"),
            std::string::npos);
  fs::remove(templates);
  fs::create_directories(templates);
  write("additional_chat_templates/tool_use.jinja", "{{ messages }}");
  for (const std::string name : {"README.md", "tool_use.jinja.bak", ".jinja"}) {
    write("additional_chat_templates/" + name, "x");
    const std::string error = thrown_message([&] { read_hf_tokenizer(dir_.string()); });
    EXPECT_NE(error.find((templates / name).string() + " is not a regular NAME.jinja file"), std::string::npos)
        << error;
    fs::remove(templates / name);
  }
  fs::create_directories(templates / "nested.jinja");
  const auto tokenizer_error = [&] { return thrown_message([&] { read_hf_tokenizer(dir_.string()); }); };
  EXPECT_NE(tokenizer_error().find("nested.jinja is not a regular NAME.jinja file"), std::string::npos);
  fs::remove(templates / "nested.jinja");
  fs::create_symlink(dir_ / "missing.jinja", templates / "dangling.jinja");
  EXPECT_NE(tokenizer_error().find("dangling.jinja is not a regular NAME.jinja"), std::string::npos);
  fs::remove(templates / "dangling.jinja");
  EXPECT_EQ(read_hf_tokenizer(dir_.string()).files.back(), "additional_chat_templates/tool_use.jinja");
}

// The BOS is found as the EOS is: tokenizer_config.json's bos_token, else special_tokens_map.json's, resolved
// through added_tokens, then the model vocabulary.
TEST_F(TokenizerFolderTest, BosTokenResolvedAsTheEosIs) {
  write("tokenizer.json", R"({"model": {"type": "BPE", "vocab": {"a": 0, "</s>": 1, "<s>": 2}},
      "added_tokens": [{"id": 9, "content": "<|begin|>"}]})");
  write("tokenizer_config.json", R"({"eos_token": "</s>"})");
  HfTokenizerInfo info = read_hf_tokenizer(dir_.string());
  EXPECT_EQ(info.bos_id, -1);
  EXPECT_EQ(info.bos_token, "");
  EXPECT_EQ(info.describe().find("BOS"), std::string::npos) << info.describe();
  write("special_tokens_map.json", R"({"bos_token": "<s>"})");
  info = read_hf_tokenizer(dir_.string());
  EXPECT_EQ(info.bos_token, "<s>");
  EXPECT_EQ(info.bos_id, 2);
  write("tokenizer_config.json", R"({"eos_token": "</s>", "bos_token": {"content": "<|begin|>", "lstrip": false}})");
  info = read_hf_tokenizer(dir_.string());  // tokenizer_config.json wins, an added token's id
  EXPECT_EQ(info.bos_token, "<|begin|>");
  EXPECT_EQ(info.bos_id, 9);
  EXPECT_EQ(info.eod_id, 1);
  EXPECT_NE(info.describe().find("EOD </s> = 1, BOS <|begin|> = 9"), std::string::npos) << info.describe();
  write("tokenizer_config.json", R"({"bos_token": "<start>"})");
  const std::string error = thrown_message([&] { read_hf_tokenizer(dir_.string()); });
  EXPECT_NE(error.find("names bos_token \"<start>\", but " + (dir_ / "tokenizer.json").string() + " has no such"),
            std::string::npos)
      << error;
}

TEST_F(TokenizerFolderTest, ErrorsNameTheFileAndTheFix) {
  EXPECT_NE(thrown_message([&] { read_hf_tokenizer((dir_ / "none").string()); }).find("tools/train_tokenizer.py"),
            std::string::npos);
  EXPECT_NE(thrown_message([&] { read_hf_tokenizer(dir_.string()); }).find("has no tokenizer.json"), std::string::npos);
  write("tokenizer.json", "{not json");
  EXPECT_NE(thrown_message([&] { read_hf_tokenizer(dir_.string()); }).find("is not valid JSON"), std::string::npos);
  write("tokenizer.json", R"({"model": {"vocab": {"a": 0}}})");
  write("tokenizer_config.json", R"({"eos_token": "</s>"})");
  EXPECT_NE(thrown_message([&] { read_hf_tokenizer(dir_.string()); }).find("names eos_token \"</s>\", but"),
            std::string::npos);
  write("tokenizer.json", R"({"nomodel": 1})");
  EXPECT_NE(thrown_message([&] { read_hf_tokenizer(dir_.string()); }).find("no \"model\" object"), std::string::npos);
}

// Found with tests/fuzz/hf_tokenizer_fuzz.cpp's harness: an id of INT64_MAX overflowed the vocabulary size (id + 1,
// undefined behaviour), and ids past INT32_MAX were cut to 32 bits in eod_id and bos_id. Token ids are 32-bit.
TEST_F(TokenizerFolderTest, TokenIdsPast32BitsAreRefused) {
  write("tokenizer.json", R"({"model": {"vocab": {"a": 0, "b": 9223372036854775807}}})");
  std::string error = thrown_message([&] { read_hf_tokenizer(dir_.string()); });
  EXPECT_NE(error.find((dir_ / "tokenizer.json").string() + ": model.vocab[\"b\"] = 9223372036854775807 is not a "
                                                            "token id (an integer from 0 to 2147483647)"),
            std::string::npos)
      << error;
  write("tokenizer.json", R"({"model": {"vocab": {"a": 0}}, "added_tokens": [{"id": 2147483648, "content": "x"}]})");
  error = thrown_message([&] { read_hf_tokenizer(dir_.string()); });
  EXPECT_NE(error.find("an added_tokens entry has no \"id\" from 0 to 2147483647"), std::string::npos) << error;
  write("tokenizer.json", R"({"model": {"vocab": {"a": 2147483647}}})");
  EXPECT_EQ(read_hf_tokenizer(dir_.string()).vocab_size, int64_t{2147483648});
}

// Found by tests/fuzz/hf_tokenizer_fuzz.cpp: a number past double's range (nlohmann::json's out_of_range, not its
// parse_error) escaped read_hf_tokenizer as a foreign exception.
TEST_F(TokenizerFolderTest, ANumberPastDoubleIsNotValidJson) {
  write("tokenizer.json", R"({"model": {"vocab": {"a": 0}, "dropout": 2e999}})");
  const std::string error = thrown_message([&] { read_hf_tokenizer(dir_.string()); });
  EXPECT_NE(error.find((dir_ / "tokenizer.json").string() + " is not valid JSON"), std::string::npos) << error;
  write("tokenizer.json", R"({"model": {"vocab": {"a": 0}}})");
  write("tokenizer_config.json", R"({"eos_token": "a", "model_max_length": 1e400})");
  EXPECT_NE(thrown_message([&] { read_hf_tokenizer(dir_.string()); }).find("tokenizer_config.json is not valid JSON"),
            std::string::npos);
}

}  // namespace
}  // namespace sg::data
