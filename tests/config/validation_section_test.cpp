// Bridge's validation section (ValidationConfig): its keys load from YAML and overrides and round-trip; the old
// names train.eval_interval, train.eval_iters and train.skip_train still set them (Bridge reads them, deprecated), a
// file's null under an old name is Bridge's unset field, two names with different values in one file are refused,
// an override under either name replaces the value; validate's rules and notes for the section, and the keys train
// refuses as not implemented.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "config/config.h"
#include "config/validate.h"
#include "data/indexed_dataset.h"
#include "test_dir.h"
#include "validation_report_text.h"

namespace sg::config {
namespace {

using test::check_recipe;
using test::describe;

const char kModel[] =
    "model: {num_layers: 2, hidden_size: 64, num_attention_heads: 4, seq_length: 32, vocab_size: 256}\n";

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

bool has_note(const ValidationReport& r, const std::string& text) {
  return std::any_of(r.notes.begin(), r.notes.end(),
                     [&](const Note& n) { return n.message.find(text) != std::string::npos; });
}

bool has_violation(const ValidationReport& r, const std::string& key, const std::string& text) {
  return std::any_of(r.violations.begin(), r.violations.end(), [&](const Violation& v) {
    return test::names_key(v, key) && (v.message + " " + v.fix).find(text) != std::string::npos;
  });
}

TEST(ValidationSection, KeysLoadAndRoundTripUnderTheValidationSection) {
  const Config c = load_config_yaml(std::string(kModel) +
                                        "validation:\n  eval_interval: 50\n  eval_iters: 4\n  start_eval_at_iter: 200\n"
                                        "  skip_train: true\n",
                                    "r.yaml");
  EXPECT_EQ(c.validation.eval_interval.value_or(0), 50);
  EXPECT_EQ(c.validation.eval_iters, 4);
  EXPECT_EQ(c.validation.start_eval_at_iter.value_or(0), 200);
  EXPECT_TRUE(c.validation.skip_train);
  const std::string yaml = emit_yaml(c);
  EXPECT_NE(yaml.find("validation:\n  eval_interval: 50\n  eval_iters: 4\n  start_eval_at_iter: 200\n"),
            std::string::npos)
      << yaml;
  EXPECT_EQ(emit_yaml(load_config_yaml(yaml, "emitted")), yaml);
}

TEST(ValidationSection, BridgesDeprecatedTrainNamesSetTheValidationKeys) {
  const Config c = load_config_yaml(std::string(kModel) +
                                        "train:\n  eval_interval: 7\n  eval_iters: 3\n"
                                        "  skip_train: true\n",
                                    "old.yaml");
  EXPECT_EQ(c.validation.eval_interval.value_or(0), 7);
  EXPECT_EQ(c.validation.eval_iters, 3);
  EXPECT_TRUE(c.validation.skip_train);
  // Written under the current names only: the file reads back the same.
  const std::string yaml = emit_yaml(c);
  const size_t train = yaml.find("\ntrain:\n"), validation = yaml.find("\nvalidation:\n");
  ASSERT_NE(train, std::string::npos);
  EXPECT_EQ(yaml.substr(train, validation - train).find("eval_"), std::string::npos) << yaml;
  EXPECT_NE(yaml.find("\nvalidation:\n  eval_interval: 7\n  eval_iters: 3\n"), std::string::npos) << yaml;
  // validate says which name is deprecated, where it was written and what the current one is.
  const ValidationReport r = validate(load_config("llama/tiny", {"train.eval_interval=5"}));
  EXPECT_TRUE(has_note(r,
                       "train.eval_interval (at override 'train.eval_interval=5') is Megatron-Bridge's deprecated "
                       "name of validation.eval_interval"))
      << describe(r);
  EXPECT_FALSE(has_note(validate(load_config("llama/tiny", {"validation.eval_interval=5"})), "deprecated"));
}

// A Bridge config dumped to YAML lists TrainingConfig's deprecated fields as null beside the validation section:
// in either order, the null leaves the validation key as it is.
TEST(ValidationSection, AFilesNullUnderTheOldNameIsBridgesUnsetField) {
  for (const bool train_first : {true, false}) {
    const std::string train = "train:\n  eval_interval: null\n  eval_iters: null\n  skip_train: null\n";
    const std::string validation = "validation:\n  eval_interval: 500\n  eval_iters: 32\n  skip_train: false\n";
    const Config c =
        load_config_yaml(std::string(kModel) + (train_first ? train + validation : validation + train), "dump.yaml");
    EXPECT_EQ(c.validation.eval_interval.value_or(0), 500) << train_first;
    EXPECT_EQ(c.validation.eval_iters, 32) << train_first;
  }
  // Both names with the same value (a dump of a Bridge config that used the old name): accepted.
  const Config same = load_config_yaml(
      std::string(kModel) + "train:\n  eval_interval: 20\nvalidation:\n  eval_interval: 20\n", "same.yaml");
  EXPECT_EQ(same.validation.eval_interval.value_or(0), 20);
}

TEST(ValidationSection, TwoNamesWithDifferentValuesInOneFileAreRefusedNamingBoth) {
  const std::string message = error_of([] {
    load_config_yaml(std::string(kModel) + "train:\n  eval_interval: 2\nvalidation:\n  eval_interval: 3\n", "r.yaml");
  });
  for (const char* part :
       {"r.yaml:5:18: validation.eval_interval = 3", "train.eval_interval = 2 is set too (at r.yaml:3:18)",
        "deprecated name of validation.eval_interval"}) {
    EXPECT_NE(message.find(part), std::string::npos) << part << "\n" << message;
  }
  // The same with the old name last, and for a value set to null under the current name.
  EXPECT_NE(error_of([] {
              load_config_yaml(std::string(kModel) + "validation:\n  eval_iters: 3\ntrain:\n  eval_iters: 4\n",
                               "r.yaml");
            }).find("validation.eval_iters = 3 is set too"),
            std::string::npos);
}

// A null is Bridge's unset field under either name: the value set under the other name stands, in either order.
TEST(ValidationSection, ANullUnderEitherNameLeavesTheOtherNamesValue) {
  for (const char* yaml : {"train:\n  eval_interval: 2\nvalidation:\n  eval_interval: null\n",
                           "validation:\n  eval_interval: null\ntrain:\n  eval_interval: 2\n"}) {
    EXPECT_EQ(load_config_yaml(std::string(kModel) + yaml, "r.yaml").validation.eval_interval.value_or(0), 2) << yaml;
  }
  // eval_iters has no null (Megatron's None would turn evaluation off): a type error, as before.
  EXPECT_NE(error_of([] { load_config_yaml(std::string(kModel) + "validation:\n  eval_iters: null\n", "r.yaml"); }),
            "");
}

TEST(ValidationSection, AnOverrideUnderEitherNameReplacesTheValue) {
  // A recipe written with the old name, overridden with the new one, and the other way round.
  const std::string old_recipe = std::string(kModel) + "train:\n  eval_interval: 2\n";
  Config c = load_config_yaml(old_recipe, "r.yaml");
  apply_override(c, "validation.eval_interval=9");
  EXPECT_EQ(c.validation.eval_interval.value_or(0), 9);
  c = load_config_yaml(std::string(kModel) + "validation:\n  eval_interval: 2\n", "r.yaml");
  apply_override(c, "train.eval_interval=11");
  EXPECT_EQ(c.validation.eval_interval.value_or(0), 11);
  // An override's null under the old name is what its user asked for: no evaluation (unlike a file's null).
  apply_override(c, "train.eval_interval=null");
  EXPECT_FALSE(c.validation.eval_interval.has_value());
  // A wrong type under the old name says which key it is.
  const std::string message = error_of([&] { apply_override(c, "train.eval_iters=abc"); });
  EXPECT_NE(message.find("written as train.eval_iters, Bridge's deprecated name of validation.eval_iters"),
            std::string::npos)
      << message;
  EXPECT_EQ(c.validation.eval_iters, 100);
}

TEST(ValidationSection, ValidateChecksTheSectionsValues) {
  EXPECT_TRUE(has_violation(check_recipe("llama/tiny", {"validation.start_eval_at_iter=-1"}),
                            "validation.start_eval_at_iter", ">= 0"));
  EXPECT_TRUE(
      has_note(check_recipe("llama/tiny", {"validation.start_eval_at_iter=10"}), "start_eval_at_iter has no effect"));
  EXPECT_TRUE(check_recipe("llama/tiny", {"validation.eval_interval=5", "validation.start_eval_at_iter=10"}).ok());
  // skip_train: saves nothing, so checkpoint.overwrite is a contradiction; it needs validation data like an
  // evaluation during training; without a checkpoint to load it says it evaluates the initial weights.
  EXPECT_TRUE(has_violation(
      check_recipe("llama/tiny", {"validation.skip_train=true", "checkpoint.save=/tmp/x", "checkpoint.overwrite=true"}),
      "checkpoint.overwrite", "saves nothing"));
  EXPECT_TRUE(has_violation(
      check_recipe("llama/tiny", {"validation.skip_train=true", "dataset.mock=false", "dataset.data_path=null"}),
      "validation.skip_train", "no validation data"));
  const ValidationReport fresh = check_recipe("llama/tiny", {"validation.skip_train=true"});
  EXPECT_TRUE(fresh.ok()) << describe(fresh);
  EXPECT_TRUE(has_note(fresh, "the initial, untrained weights")) << describe(fresh);
  EXPECT_TRUE(has_note(check_recipe("llama/tiny", {"validation.skip_train=true", "checkpoint.load=/tmp/ck"}),
                       "one evaluation of the checkpoint's weights"));
}

// Every key of the validation section is implemented: Megatron-LM's test_mode too (its realtime test that the
// data-parallel ranks hold the same weights), with a note that says what it costs, or that one rank checks nothing.
TEST(ValidationSection, EveryKeyIsImplementedAndTestModeSaysWhatItChecks) {
  for (const std::vector<std::string>& overrides :
       {std::vector<std::string>{"validation.test_mode=true"},
        std::vector<std::string>{"validation.eval_global_batch_size=12", "validation.eval_micro_batch_size=2"}}) {
    EXPECT_TRUE(unimplemented_features(validate(load_config("llama/tiny", overrides)).config).empty()) << overrides[0];
  }
  const ValidationReport one = check_recipe("llama/tiny", {"validation.test_mode=true"});
  EXPECT_TRUE(one.ok()) << describe(one);
  EXPECT_TRUE(has_note(one, "with one rank there is nothing to compare")) << describe(one);
  Config config = load_config("llama/tiny", {"validation.test_mode=true", "train.global_batch_size=8"});
  config.data_parallel_size = 2;
  const ValidationReport two = validate(config);
  EXPECT_TRUE(two.ok()) << describe(two);
  EXPECT_TRUE(has_note(two, "after every step the 2 ranks compare fingerprints of their weights")) << describe(two);
  EXPECT_FALSE(has_note(check_recipe("llama/tiny", {}), "validation.test_mode"));
}

// Bridge's rule for the evaluation batch: eval_global_batch_size divides into eval_micro_batch_size microbatches on
// every data-parallel rank (each null: the training's). llama/tiny trains micro batches of 4.
TEST(ValidationSection, TheEvaluationBatchDividesIntoMicrobatchesOnEveryRank) {
  const auto report = [](const std::vector<std::string>& overrides, int ranks = 1) {
    Config config = load_config("llama/tiny", overrides);
    config.data_parallel_size = ranks;
    return validate(config);
  };
  {  // 6 sequences in microbatches of 4 (the training's): refused, naming the keys and a size that works.
    const ValidationReport r = report({"validation.eval_global_batch_size=6"});
    ASSERT_EQ(r.violations.size(), 1u);
    const std::string text = format_violation(r.violations[0]);
    EXPECT_NE(text.find("6 sequences does not divide into microbatches of 4"), std::string::npos) << text;
    EXPECT_NE(text.find("validation.eval_global_batch_size = 6"), std::string::npos) << text;
    EXPECT_NE(text.find("a multiple of 4, e.g. 4"), std::string::npos) << text;
  }
  {  // ... in microbatches of 2: accepted, with a note that the step's microbatches of 4 run it.
    const ValidationReport r = report({"validation.eval_global_batch_size=6", "validation.eval_micro_batch_size=2"});
    EXPECT_TRUE(r.ok()) << format_violation(r.violations.at(0));
    bool noted = false;
    for (const Note& n : r.notes)
      noted = noted || n.message.find("training step's microbatches of 4") != std::string::npos;
    EXPECT_TRUE(noted);
  }
  {  // 12 in microbatches of 2 on 4 ranks: not a multiple of 8, refused; on 3 ranks a multiple of 6, accepted.
    const auto r = report(
        {"validation.eval_global_batch_size=12", "validation.eval_micro_batch_size=2", "train.global_batch_size=48"},
        4);
    ASSERT_EQ(r.violations.size(), 1u);
    EXPECT_NE(format_violation(r.violations[0]).find("each of 4 data-parallel ranks"), std::string::npos);
    EXPECT_TRUE(report({"validation.eval_global_batch_size=12", "validation.eval_micro_batch_size=2",
                        "train.global_batch_size=48"},
                       3)
                    .ok());
  }
  for (const char* bad : {"validation.eval_global_batch_size=0", "validation.eval_micro_batch_size=-2"}) {
    const ValidationReport r = report({bad});
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_NE(format_violation(r.violations[0]).find("must be >= 1"), std::string::npos) << bad;
  }
}

// validation.full_validation (Megatron-LM's): a note gives the whole set's samples and batches; an endless mock
// stream and a weighted blend (whose samples follow the weights) have no whole set to read, and are refused.
TEST(ValidationSection, FullValidationNeedsASetWithAnEnd) {
  const std::filesystem::path dir = test::fresh_test_dir("validation_full_validation");
  const std::string prefix = (dir / "corpus").string();
  {
    data::IndexedDatasetWriter writer(prefix, data::TokenDtype::uint16);
    for (int d = 0; d < 10; ++d) writer.add_document(std::vector<int32_t>(1000, d + 1));
    writer.finalize();
  }
  // llama/tiny (seq_length 256, global batch 4) validating on the corpus's 10000 tokens: 39 windows, 10 batches.
  const std::vector<std::string> on_corpus = {"dataset.mock=false",
                                              "dataset.valid_data_path=[" + prefix + "]",
                                              "dataset.data_path=[" + prefix + "]",
                                              "model.vocab_size=256",
                                              "validation.eval_interval=10",
                                              "validation.full_validation=true"};
  const ValidationReport ok = validate(load_config("llama/tiny", on_corpus));
  EXPECT_TRUE(ok.ok()) << format_violation(ok.violations.at(0));
  bool noted = false;
  for (const Note& n : ok.notes) {
    noted =
        noted || n.message.find("the whole validation set, 39 samples in 10 global batches of 4") != std::string::npos;
  }
  EXPECT_TRUE(noted);

  const ValidationReport mock = validate(load_config("llama/tiny", {"validation.full_validation=true"}));
  ASSERT_FALSE(mock.ok());
  EXPECT_NE(format_violation(mock.violations[0]).find("dataset.mock is an endless stream"), std::string::npos);

  std::vector<std::string> weighted = on_corpus;
  weighted.push_back("dataset.valid_data_path=[\"0.5\"," + prefix + ",\"0.5\"," + prefix + "]");
  const ValidationReport blend = validate(load_config("llama/tiny", weighted));
  ASSERT_FALSE(blend.ok());
  const std::string text = format_violation(blend.violations[0]);
  EXPECT_NE(text.find("dataset.valid_data_path is a weighted blend"), std::string::npos) << text;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace sg::config
