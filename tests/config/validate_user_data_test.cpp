// Rule 16's user-data checks: the tokenizer section (type, folder, the vocabulary it implies, padded as
// Megatron pads it), dataset.split / dataset.valid_data_path, validation.eval_interval / validation.eval_iters,
// dataset.eod_mask_loss, the logger section (Bridge's W&B keys: a note) — and the keys round-trip through YAML.
// The datasets' own checks (present, relative paths): validate_data_files_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include "config/config.h"
#include "config/graph_flags.h"
#include "config/tokenizer_vocab.h"
#include "config/validate.h"
#include "data/indexed_dataset.h"
#include "test_dir.h"
#include "validation_report_text.h"

namespace sg::config {
namespace {

namespace fs = std::filesystem;

using test::describe;

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
    // Datasets to name in data_path / valid_data_path (validation checks that they exist).
    for (const std::string name : {"corpus", "valid"}) {
      data::IndexedDatasetWriter w((dir_ / name).string(), data::TokenDtype::uint16);
      w.add_document(std::vector<int32_t>{1, 2, 3});
      w.finalize();
    }
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
  std::string corpus() const { return (dir_ / "corpus").string(); }
  std::string valid() const { return (dir_ / "valid").string(); }
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
  const std::vector<std::string> data = {"dataset.mock=false", "dataset.data_path=[" + corpus() + "]"};
  const std::string valid_data = "dataset.valid_data_path=[" + valid() + "]";
  auto with = [&](std::vector<std::string> more) {
    std::vector<std::string> o = data;
    o.insert(o.end(), more.begin(), more.end());
    return check(o);
  };
  EXPECT_TRUE(with({"dataset.split=969,30,1", "validation.eval_interval=10"}).ok());
  EXPECT_TRUE(with({valid_data, "validation.eval_interval=10"}).ok());
  EXPECT_TRUE(has_violation(with({"dataset.split=9,1,x"}), "dataset.split", "969,30,1"));
  EXPECT_TRUE(has_violation(with({"dataset.split=99,1", valid_data}), "dataset.valid_data_path", "use one"));
  EXPECT_TRUE(
      has_violation(with({"validation.eval_interval=10"}), "validation.eval_interval", "dataset.split=969,30,1"));
  EXPECT_TRUE(has_violation(with({"dataset.split=100,0,0", "validation.eval_interval=10"}), "validation.eval_interval",
                            "no documents"));
  // No training share: train would refuse its empty split after reading the data.
  EXPECT_TRUE(has_violation(with({"dataset.split=0,1,0"}), "dataset.split", "first (train) share"));
  EXPECT_TRUE(
      has_violation(with({"dataset.split=9,1", "validation.eval_interval=0"}), "validation.eval_interval", ">= 1"));
  EXPECT_TRUE(has_violation(with({"dataset.split=9,1", "validation.eval_interval=5", "validation.eval_iters=0"}),
                            "validation.eval_iters", "100"));
  // No more than the step counts (2^31 - 1): the evaluation's loss buffer holds a float a batch.
  EXPECT_TRUE(has_violation(
      with({"dataset.split=9,1", "validation.eval_interval=5", "validation.eval_iters=4611686018427387904"}),
      "validation.eval_iters", "100"));
  EXPECT_TRUE(with({"dataset.split=9,1", "validation.eval_interval=5", "validation.eval_iters=2147483647"}).ok());
  EXPECT_NE(describe(with({"dataset.split=9,1"})).find("no evaluation runs"), std::string::npos);
  EXPECT_TRUE(check({"validation.eval_interval=5"}).ok());  // mock data validates on mock samples
}

// A tokenizer that is named but cannot be used leaves model.vocab_size null: its own error says why, and no
// second one claims there is "no tokenizer to take it from". Without a tokenizer that one is the error.
TEST_F(UserDataValidation, ABrokenTokenizerIsReportedAloneNotAsAMissingVocabulary) {
  const auto vocab_violations = [](const ValidationReport& r) {
    return std::count_if(r.violations.begin(), r.violations.end(), [](const Violation& v) {
      return v.message.find("model.vocab_size must be set") != std::string::npos;
    });
  };
  const std::vector<std::vector<std::string>> broken = {
      {"tokenizer.tokenizer_type=HuggingFaceTokenizer", "tokenizer.tokenizer_model=" + (dir_ / "missing").string()},
      {"tokenizer.tokenizer_type=HuggingFaceTokenizer"},
      {"tokenizer.tokenizer_model=" + dir_.string()},
      {"tokenizer.tokenizer_type=SentencePieceTokenizer", "tokenizer.tokenizer_model=" + dir_.string()},
  };
  for (std::vector<std::string> o : broken) {
    o.push_back("model.vocab_size=null");
    const ValidationReport r = check(o);
    ASSERT_EQ(r.violations.size(), 1u) << o[0] << ":\n" << describe(r);
    EXPECT_EQ(r.violations[0].values[0].key.rfind("tokenizer.", 0), 0u) << describe(r);
    EXPECT_EQ(vocab_violations(r), 0) << describe(r);
  }
  const ValidationReport none = check({"model.vocab_size=null"});
  EXPECT_EQ(vocab_violations(none), 1) << describe(none);
  EXPECT_TRUE(check(with_tokenizer({"model.vocab_size=null"})).ok());
}

// A data path on a mock recipe would silently train on random tokens: refused, naming dataset.mock=false.
TEST_F(UserDataValidation, MockDataRefusesPathsItWouldNotRead) {
  EXPECT_TRUE(has_violation(check({"dataset.data_path=[x]"}), "dataset.data_path", "dataset.mock=false"));
  EXPECT_TRUE(has_violation(check({"dataset.valid_data_path=[v]"}), "dataset.valid_data_path", "dataset.mock=false"));
  EXPECT_TRUE(check({"dataset.mock=false", "dataset.data_path=[" + corpus() + "]",
                     "dataset.valid_data_path=[" + valid() + "]"})
                  .ok());
  const ValidationReport split_only = check({"dataset.split=969,30,1"});  // a share setting: a note, not an error
  EXPECT_TRUE(split_only.ok());
  EXPECT_NE(describe(split_only).find("the split's shares are not used"), std::string::npos);
}

// Under mock a split that does not parse is an error (train parses it for the validation data whatever
// dataset.mock says), reported alone: not also as a split whose shares "are not used".
TEST_F(UserDataValidation, MockWithABadSplitIsAnErrorWithoutTheUnusedSplitNote) {
  const ValidationReport bad = check({"dataset.split=a,b"});
  EXPECT_TRUE(has_violation(bad, "dataset.split", "969,30,1")) << describe(bad);
  EXPECT_EQ(describe(bad).find("not used"), std::string::npos) << describe(bad);
  EXPECT_EQ(describe(bad).find("not read"), std::string::npos) << describe(bad);
}

// Megatron reads the shares with a regex for numbers: "90/10/0" and "90, 10, 0" are splits there, and here.
TEST_F(UserDataValidation, SplitSharesSeparatedBySlashesValidate) {
  const std::vector<std::string> data = {"dataset.mock=false", "dataset.data_path=[" + corpus() + "]",
                                         "validation.eval_interval=10"};
  for (const std::string split : {"90/10/0", "90, 10, 0", "99,1", "99/1"}) {
    std::vector<std::string> o = data;
    o.push_back("dataset.split=" + split);
    const ValidationReport r = check(o);
    EXPECT_TRUE(r.ok()) << split << ":\n" << describe(r);
  }
  EXPECT_TRUE(check({"dataset.split=90/10/0"}).ok());  // mock: a note
  for (const std::string bad : {"a/b", "90/-10/0", "0/0/0"}) {
    EXPECT_TRUE(has_violation(check({"dataset.split=" + bad}), "dataset.split", "90/10/0")) << bad;
  }
}

TEST_F(UserDataValidation, EodMaskLossNeedsTheTokenizersEod) {
  EXPECT_TRUE(has_violation(check({"dataset.eod_mask_loss=true"}), "dataset.eod_mask_loss", "tokenizer"));
  EXPECT_TRUE(check(with_tokenizer({"dataset.eod_mask_loss=true", "model.vocab_size=null"})).ok());
  EXPECT_TRUE(has_violation(check({"logger.tensorboard_dir="
                                   "\"\""}),
                            "logger.tensorboard_dir", "directory"));
}

// Bridge's tokenizer.use_tokenizer_vocab_size (its from-scratch recipes set it): a set model.vocab_size gives way to
// the tokenizer's padded vocabulary, with a note; without a tokenizer it changes nothing, and says so.
TEST_F(UserDataValidation, UseTokenizerVocabSizeReplacesASetVocabSize) {
  const ValidationReport r =
      check(with_tokenizer({"model.vocab_size=4096", "tokenizer.use_tokenizer_vocab_size=true"}));
  ASSERT_TRUE(r.ok()) << describe(r);
  EXPECT_EQ(r.config.model.vocab_size.value_or(0), 2048);  // 2000 tokens padded to a multiple of 128
  EXPECT_NE(describe(r).find("model.vocab_size 4096 is replaced by the tokenizer's vocabulary"), std::string::npos)
      << describe(r);
  // Without the key the set size stays (with a note that it is not the padded one).
  EXPECT_EQ(check(with_tokenizer({"model.vocab_size=4096"})).config.model.vocab_size.value_or(0), 4096);
  const ValidationReport mock = check({"tokenizer.use_tokenizer_vocab_size=true"});
  EXPECT_TRUE(mock.ok());
  EXPECT_EQ(mock.config.model.vocab_size, load_config("llama/tiny").model.vocab_size);
  EXPECT_NE(describe(mock).find("has no effect without a tokenizer"), std::string::npos) << describe(mock);
}

TEST_F(UserDataValidation, NewKeysRoundTripThroughYaml) {
  Config c = load_config(
      "llama/tiny", with_tokenizer({"dataset.split=969,30,1", "validation.eval_interval=50", "validation.eval_iters=4",
                                    "logger.tensorboard_dir=runs/tb", "dataset.eod_mask_loss=true",
                                    "model.make_vocab_size_divisible_by=64"}));
  const Config back = load_config_yaml(emit_yaml(c), "emitted");
  EXPECT_EQ(emit_yaml(back), emit_yaml(c));
  EXPECT_EQ(back.dataset.split.value_or(""), "969,30,1");
  EXPECT_EQ(back.validation.eval_interval.value_or(0), 50);
  EXPECT_EQ(back.validation.eval_iters, 4);
  EXPECT_EQ(back.logger.tensorboard_dir.value_or(""), "runs/tb");
  EXPECT_TRUE(back.dataset.eod_mask_loss);
  EXPECT_EQ(back.tokenizer.tokenizer_type.value_or(""), "HuggingFaceTokenizer");
  EXPECT_EQ(back.model.make_vocab_size_divisible_by, 64);
}

// A Megatron-Bridge config's logger section has W&B keys (config/bridge_inert_keys.h, with the other Bridge keys
// stepgraph accepts without effect): they load (YAML and overrides), round-trip through `config show`, and only a
// note names the ones set and says where the metrics go instead.
TEST_F(UserDataValidation, BridgeWandbKeysLoadAndAreOnlyNoted) {
  const auto wandb_notes = [](const ValidationReport& r) {
    std::vector<Note> out;
    for (const Note& n : r.notes) {
      if (n.message.find("Weights & Biases") != std::string::npos) out.push_back(n);
    }
    return out;
  };
  EXPECT_TRUE(wandb_notes(check({})).empty());
  std::vector<std::string> wandb_keys;
  for (const BridgeInertKey& k : kBridgeInertKeys) {
    if (std::string_view(k.section) == "logger" && std::string_view(k.key).rfind("wandb_", 0) == 0) {
      wandb_keys.push_back(k.key);
    }
  }
  EXPECT_EQ(wandb_keys, (std::vector<std::string>{"wandb_project", "wandb_exp_name", "wandb_entity",
                                                   "wandb_save_dir"}));
  std::vector<std::string> all;
  for (const std::string& key : wandb_keys) {
    const std::string dotted = "logger." + key;
    all.push_back(dotted + "=my_" + key);
    const ValidationReport r = check({all.back()});
    EXPECT_TRUE(r.ok()) << describe(r);
    const std::vector<Note> notes = wandb_notes(r);
    ASSERT_EQ(notes.size(), 1u) << describe(r);
    EXPECT_NE(notes[0].message.find(dotted), std::string::npos) << notes[0].message;
    EXPECT_NE(notes[0].message.find("metrics.jsonl"), std::string::npos) << notes[0].message;
    EXPECT_NE(notes[0].message.find("logger.tensorboard_dir"), std::string::npos) << notes[0].message;
    ASSERT_EQ(notes[0].values.size(), 1u);
    EXPECT_EQ(notes[0].values[0].value, "my_" + key);
  }
  const ValidationReport every = check(all);
  ASSERT_EQ(wandb_notes(every).size(), 1u) << describe(every);  // one note naming all four
  EXPECT_EQ(wandb_notes(every)[0].values.size(), wandb_keys.size());

  const Config c = load_config("llama/tiny", all);
  const std::string yaml = emit_yaml(c);
  const Config back = load_config_yaml(yaml, "emitted");
  EXPECT_EQ(emit_yaml(back), yaml);
  for (const std::string& key : wandb_keys) {
    EXPECT_EQ(format_value(back, "logger." + key), "my_" + key);
    EXPECT_NE(yaml.find("  " + key + ": my_" + key + "\n"), std::string::npos) << yaml;
  }
  // Printed only when set: no feature offered that stepgraph lacks, and the YAML of other configs is unchanged.
  EXPECT_EQ(emit_yaml(load_config("llama/tiny")).find("wandb"), std::string::npos);
  const Config one = load_config("llama/tiny", {"logger.wandb_entity=team"});
  const std::string one_yaml = emit_yaml(one);
  EXPECT_NE(one_yaml.find("  tensorboard_dir: null\n  wandb_entity: team\nrng:\n"), std::string::npos) << one_yaml;
  EXPECT_EQ(emit_yaml(load_config_yaml(one_yaml, "emitted")), one_yaml);

  const Config bridge = load_config_yaml("logger:\n  wandb_project: p\n  wandb_save_dir: /tmp/wandb\n", "bridge.yaml");
  EXPECT_EQ(format_value(bridge, "logger.wandb_project"), "p");
  EXPECT_EQ(format_value(bridge, "logger.wandb_save_dir"), "/tmp/wandb");
  EXPECT_EQ(format_value(bridge, "logger.wandb_entity"), "null");
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
