// Rule 16's user-data checks: the tokenizer section (type, folder, the vocabulary it implies, padded as
// Megatron pads it), dataset.split / dataset.valid_data_path, train.eval_interval / train.eval_iters,
// dataset.eod_mask_loss, logger.tensorboard_dir — and the keys round-trip through YAML.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "config/config.h"
#include "config/graph_flags.h"
#include "config/tokenizer_vocab.h"
#include "config/validate.h"
#include "test_dir.h"

namespace sg::config {
namespace {

namespace fs = std::filesystem;

std::string describe(const ValidationReport& r) {
  std::string out;
  for (const auto& v : r.violations) out += format_violation(v);
  for (const auto& n : r.notes) out += format_note(n);
  return out;
}

bool has_violation(const ValidationReport& r, const std::string& key, const std::string& text) {
  return std::any_of(r.violations.begin(), r.violations.end(), [&](const Violation& v) {
    const bool keyed = std::any_of(v.values.begin(), v.values.end(), [&](const KeyValue& kv) { return kv.key == key; });
    return keyed && (v.message + " " + v.fix).find(text) != std::string::npos;
  });
}

class UserDataValidation : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = sg::test::fresh_test_dir("sg_user_data");
    // A 2000-token vocabulary (ids 0..1999), EOD "<|endoftext|>" = 0.
    std::ofstream tok(dir_ / "tokenizer.json");
    tok << R"({"model": {"type": "BPE", "vocab": {)";
    for (int i = 1; i < 2000; ++i) tok << (i > 1 ? "," : "") << "\"t" << i << "\": " << i;
    tok << R"(}}, "added_tokens": [{"id": 0, "content": "<|endoftext|>"}]})";
    tok.close();
    std::ofstream(dir_ / "tokenizer_config.json") << R"({"eos_token": "<|endoftext|>"})";
  }
  void TearDown() override { fs::remove_all(dir_); }

  ValidationReport check(std::vector<std::string> overrides) {
    return validate(load_config("llama/tiny", overrides));
  }
  std::vector<std::string> with_tokenizer(std::vector<std::string> more = {}) {
    std::vector<std::string> o = {"tokenizer.tokenizer_type=HuggingFaceTokenizer",
                                  "tokenizer.tokenizer_model=" + dir_.string()};
    o.insert(o.end(), more.begin(), more.end());
    return o;
  }
  fs::path dir_;
};

TEST_F(UserDataValidation, VocabularyComesFromTheTokenizerPaddedAsMegatronDoes) {
  EXPECT_EQ(padded_vocab_size(2000, 128), 2048);
  EXPECT_EQ(padded_vocab_size(2048, 128), 2048);
  EXPECT_EQ(padded_vocab_size(50257, 128), 50304);  // GPT-2, as Megatron pads it
  EXPECT_EQ(padded_vocab_size(7, 1), 7);
  const ValidationReport r = check(with_tokenizer({"model.vocab_size=null"}));
  EXPECT_TRUE(r.ok()) << describe(r);
  EXPECT_EQ(r.config.model.vocab_size.value_or(0), 2048);
  const ValidationReport r64 = check(with_tokenizer({"model.vocab_size=null", "model.make_vocab_size_divisible_by=64"}));
  EXPECT_EQ(r64.config.model.vocab_size.value_or(0), 2048);
  const ValidationReport r3 = check(with_tokenizer({"model.vocab_size=null", "model.make_vocab_size_divisible_by=3"}));
  EXPECT_EQ(r3.config.model.vocab_size.value_or(0), 2001);
}

TEST_F(UserDataValidation, AnExplicitVocabularyMustHoldEveryTokenId) {
  const ValidationReport small = check(with_tokenizer({"model.vocab_size=1999"}));
  EXPECT_TRUE(has_violation(small, "model.vocab_size", "model.vocab_size=2048")) << describe(small);
  const ValidationReport exact = check(with_tokenizer({"model.vocab_size=2000"}));  // fits, not padded: a note
  EXPECT_TRUE(exact.ok()) << describe(exact);
  EXPECT_NE(describe(exact).find("is not the tokenizer's vocabulary 2000 padded"), std::string::npos);
  EXPECT_TRUE(check(with_tokenizer({"model.vocab_size=2048"})).ok());
}

TEST_F(UserDataValidation, TokenizerSectionErrors) {
  EXPECT_TRUE(has_violation(check({"tokenizer.tokenizer_model=" + dir_.string()}), "tokenizer.tokenizer_type",
                            "HuggingFaceTokenizer"));
  EXPECT_TRUE(has_violation(check({"tokenizer.tokenizer_type=SentencePieceTokenizer",
                                   "tokenizer.tokenizer_model=" + dir_.string()}),
                            "tokenizer.tokenizer_type", "not implemented yet"));
  EXPECT_TRUE(has_violation(check({"tokenizer.tokenizer_type=HuggingFaceTokeniser",
                                   "tokenizer.tokenizer_model=" + dir_.string()}),
                            "tokenizer.tokenizer_type", "did you mean 'HuggingFaceTokenizer'"));
  EXPECT_TRUE(has_violation(check({"tokenizer.tokenizer_type=HuggingFaceTokenizer",
                                   "tokenizer.tokenizer_model=" + (dir_ / "missing").string()}),
                            "tokenizer.tokenizer_model", "tools/train_tokenizer.py"));
  EXPECT_TRUE(has_violation(check({"model.vocab_size=null"}), "model.vocab_size", "tokenizer.tokenizer_model=DIR"));
  EXPECT_TRUE(has_violation(check({"model.make_vocab_size_divisible_by=0"}), "model.make_vocab_size_divisible_by",
                            "128"));
}

TEST_F(UserDataValidation, SplitValidationDataAndEvaluation) {
  const std::vector<std::string> data = {"dataset.mock=false", "dataset.data_path=[x]"};
  auto with = [&](std::vector<std::string> more) {
    std::vector<std::string> o = data;
    o.insert(o.end(), more.begin(), more.end());
    return check(o);
  };
  EXPECT_TRUE(with({"dataset.split=969,30,1", "train.eval_interval=10"}).ok());
  EXPECT_TRUE(with({"dataset.valid_data_path=[v]", "train.eval_interval=10"}).ok());
  EXPECT_TRUE(has_violation(with({"dataset.split=9,1,x"}), "dataset.split", "969,30,1"));
  EXPECT_TRUE(has_violation(with({"dataset.split=99,1", "dataset.valid_data_path=[v]"}), "dataset.valid_data_path",
                            "use one"));
  EXPECT_TRUE(has_violation(with({"train.eval_interval=10"}), "train.eval_interval", "dataset.split=969,30,1"));
  EXPECT_TRUE(has_violation(with({"dataset.split=100,0,0", "train.eval_interval=10"}), "train.eval_interval",
                            "no documents"));
  EXPECT_TRUE(has_violation(with({"dataset.split=9,1", "train.eval_interval=0"}), "train.eval_interval", ">= 1"));
  EXPECT_TRUE(has_violation(with({"dataset.split=9,1", "train.eval_interval=5", "train.eval_iters=0"}),
                            "train.eval_iters", "100"));
  EXPECT_NE(describe(with({"dataset.split=9,1"})).find("no evaluation runs"), std::string::npos);
  EXPECT_TRUE(check({"train.eval_interval=5"}).ok());  // mock data validates on mock samples
}

// A data path on a mock recipe would silently train on random tokens: refused, naming dataset.mock=false.
TEST_F(UserDataValidation, MockDataRefusesPathsItWouldNotRead) {
  EXPECT_TRUE(has_violation(check({"dataset.data_path=[x]"}), "dataset.data_path", "dataset.mock=false"));
  EXPECT_TRUE(has_violation(check({"dataset.valid_data_path=[v]"}), "dataset.valid_data_path", "dataset.mock=false"));
  EXPECT_TRUE(check({"dataset.mock=false", "dataset.data_path=[x]", "dataset.valid_data_path=[v]"}).ok());
  const ValidationReport split_only = check({"dataset.split=969,30,1"});  // a share setting: a note, not an error
  EXPECT_TRUE(split_only.ok());
  EXPECT_NE(describe(split_only).find("split is not read"), std::string::npos);
}

TEST_F(UserDataValidation, EodMaskLossNeedsTheTokenizersEod) {
  EXPECT_TRUE(has_violation(check({"dataset.eod_mask_loss=true"}), "dataset.eod_mask_loss", "tokenizer"));
  EXPECT_TRUE(check(with_tokenizer({"dataset.eod_mask_loss=true", "model.vocab_size=null"})).ok());
  EXPECT_TRUE(has_violation(check({"logger.tensorboard_dir="
                                   "\"\""}),
                            "logger.tensorboard_dir", "directory"));
}

TEST_F(UserDataValidation, NewKeysRoundTripThroughYaml) {
  Config c = load_config("llama/tiny", with_tokenizer({"dataset.split=969,30,1", "train.eval_interval=50",
                                                       "train.eval_iters=4", "logger.tensorboard_dir=runs/tb",
                                                       "dataset.eod_mask_loss=true",
                                                       "model.make_vocab_size_divisible_by=64"}));
  const Config back = load_config_yaml(emit_yaml(c), "emitted");
  EXPECT_EQ(emit_yaml(back), emit_yaml(c));
  EXPECT_EQ(back.dataset.split.value_or(""), "969,30,1");
  EXPECT_EQ(back.train.eval_interval.value_or(0), 50);
  EXPECT_EQ(back.train.eval_iters, 4);
  EXPECT_EQ(back.logger.tensorboard_dir.value_or(""), "runs/tb");
  EXPECT_TRUE(back.dataset.eod_mask_loss);
  EXPECT_EQ(back.tokenizer.tokenizer_type.value_or(""), "HuggingFaceTokenizer");
  EXPECT_EQ(back.model.make_vocab_size_divisible_by, 64);
}

// The one rule of Bridge's CUDA-graph flags, shared by bench and train (config/graph_flags.h).
TEST(GraphFlags, UnknownImplAndScopeAreUsageErrors) {
  EXPECT_THROW(check_impl_flag("full"), ConfigError);
  EXPECT_NO_THROW(check_impl_flag("transformer_engine"));
  EXPECT_EQ(parse_scope_flag("attn, mlp"), (std::vector<std::string>{"attn", "mlp"}));
  EXPECT_THROW(parse_scope_flag("attn,mpl"), ConfigError);
}

}  // namespace
}  // namespace sg::config
