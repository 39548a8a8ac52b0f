// The files a config names, checked before anything runs: every dataset of dataset.data_path and
// dataset.valid_data_path must exist (train opens them first), reported with the data layer's own message and
// hints (data::check_dataset_exists), only for prefixes (a blend's weights are no files), not under mock. A
// relative path (dataset or tokenizer folder) is read from the working directory, and an error about one says so.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "config/config.h"
#include "config/validate.h"
#include "core/error.h"
#include "data/blended_dataset.h"
#include "data/indexed_dataset.h"
#include "test_dir.h"
#include "validation_report_text.h"

namespace sg::config {
namespace {

namespace fs = std::filesystem;

using test::describe;

// What train says of `prefix` (data::check_dataset_exists); "" when it exists.
std::string train_message(const std::string& prefix) {
  try {
    data::check_dataset_exists(prefix);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// Violations naming `key` whose message holds `text`.
size_t violations_with(const ValidationReport& r, const std::string& key, const std::string& text) {
  return static_cast<size_t>(std::count_if(r.violations.begin(), r.violations.end(), [&](const Violation& v) {
    const bool keyed =
        std::any_of(v.values.begin(), v.values.end(), [&](const KeyValue& kv) { return kv.key == key; });
    return keyed && v.message.find(text) != std::string::npos;
  }));
}

class DataFilesValidation : public ::testing::Test {
 protected:
  void SetUp() override {
    previous_ = fs::current_path();
    dir_ = fs::canonical(sg::test::fresh_test_dir("sg_validate_data_files"));
    write_dataset(path("corpus"));
    write_dataset(path("valid"));
  }
  void TearDown() override {
    fs::current_path(previous_);
    fs::remove_all(dir_);
  }
  static void write_dataset(const std::string& prefix) {
    data::IndexedDatasetWriter w(prefix, data::TokenDtype::uint16);
    w.add_document(std::vector<int32_t>{1, 2, 3});
    w.finalize();
  }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  static ValidationReport check(std::vector<std::string> overrides, bool mock = false) {
    if (!mock) overrides.insert(overrides.begin(), "dataset.mock=false");
    return validate(load_config("llama/tiny", overrides));
  }

  fs::path previous_;
  fs::path dir_;
};

TEST_F(DataFilesValidation, ExistingDatasetsValidate) {
  EXPECT_TRUE(check({"dataset.data_path=[" + path("corpus") + "]"}).ok());
  EXPECT_TRUE(check({"dataset.data_path=[" + path("corpus") + ", " + path("valid") + "]"}).ok());
  // A weighted blend: the weights are no files.
  const ValidationReport blend = check({"dataset.data_path=[0.3, " + path("corpus") + ", 0.7, " + path("valid") + "]"});
  EXPECT_TRUE(blend.ok()) << describe(blend);
  const ValidationReport with_valid =
      check({"dataset.data_path=[" + path("corpus") + "]", "dataset.valid_data_path=[" + path("valid") + "]"});
  EXPECT_TRUE(with_valid.ok()) << describe(with_valid);
}

// `stepgraph validate tiny dataset.mock=false dataset.data_path=[/nonexist/foo]` once said "valid".
TEST_F(DataFilesValidation, EveryMissingDatasetIsAViolationWithTrainsMessage) {
  const std::string missing = path("nope"), other = path("gone");
  const ValidationReport r = check({"dataset.data_path=[0.5, " + path("corpus") + ", 0.3, " + missing + ", 0.2, " +
                                    other + "]"});
  EXPECT_EQ(r.violations.size(), 2u) << describe(r);
  EXPECT_EQ(violations_with(r, "dataset.data_path", train_message(missing)), 1u) << describe(r);
  EXPECT_EQ(violations_with(r, "dataset.data_path", train_message(other)), 1u) << describe(r);
  EXPECT_NE(train_message(missing).find("stepgraph data synth --out " + missing), std::string::npos);

  const ValidationReport valid = check({"dataset.data_path=[" + path("corpus") + "]",
                                        "dataset.valid_data_path=[" + missing + "]"});
  EXPECT_EQ(violations_with(valid, "dataset.valid_data_path", train_message(missing)), 1u) << describe(valid);
  EXPECT_EQ(valid.violations.size(), 1u) << describe(valid);
}

// The hints train gives come along: a file of the pair named instead of the prefix, a left-over *.tmp.
TEST_F(DataFilesValidation, TheDataLayersHintsComeAlong) {
  const ValidationReport bin = check({"dataset.data_path=[" + path("corpus") + ".bin]"});
  ASSERT_EQ(bin.violations.size(), 1u) << describe(bin);
  EXPECT_NE(bin.violations[0].message.find("without .bin"), std::string::npos) << describe(bin);
  EXPECT_EQ(bin.violations[0].message, train_message(path("corpus") + ".bin"));

  write_dataset(path("killed"));
  fs::rename(data::index_path(path("killed")), data::index_path(path("killed")) + ".tmp");
  const ValidationReport tmp = check({"dataset.data_path=[" + path("killed") + "]"});
  ASSERT_EQ(tmp.violations.size(), 1u) << describe(tmp);
  EXPECT_NE(tmp.violations[0].message.find(".tmp is left from a write"), std::string::npos) << describe(tmp);
}

// A blend train could not parse is reported too, under the key it is in.
TEST_F(DataFilesValidation, AMalformedBlendIsAViolation) {
  const ValidationReport odd = check({"dataset.data_path=[0.3, " + path("corpus") + ", 0.7]"});
  EXPECT_EQ(violations_with(odd, "dataset.data_path", "pairs"), 1u) << describe(odd);
  const ValidationReport valid =
      check({"dataset.data_path=[" + path("corpus") + "]", "dataset.valid_data_path=[0.3, " + path("valid") + ", x]"});
  EXPECT_EQ(violations_with(valid, "dataset.valid_data_path", "dataset.valid_data_path"), 1u) << describe(valid);
}

// Mock data reads no dataset: nothing is checked (a data_path set there is its own error already).
TEST_F(DataFilesValidation, MockReadsNoDatasetSoNoneIsChecked) {
  EXPECT_TRUE(check({}, /*mock=*/true).ok());
  const ValidationReport r = check({"dataset.data_path=[" + path("nope") + "]"}, /*mock=*/true);
  ASSERT_EQ(r.violations.size(), 1u) << describe(r);
  EXPECT_NE(r.violations[0].message.find("dataset.mock is true"), std::string::npos) << describe(r);
}

// Relative paths are read from the working directory, not from the YAML's folder: the error says which.
TEST_F(DataFilesValidation, ARelativePathSaysWhatItIsRelativeTo) {
  fs::create_directories(dir_ / "work" / "data");
  fs::current_path(dir_ / "work");
  const std::string relative_to = " (relative to the working directory " + (dir_ / "work").string() + ")";
  const ValidationReport r = check({"dataset.data_path=[data/corpus]"});
  ASSERT_EQ(r.violations.size(), 1u) << describe(r);
  EXPECT_EQ(r.violations[0].message.rfind("data/corpus" + relative_to + ": ", 0), 0u) << describe(r);
  EXPECT_NE(r.violations[0].message.find(train_message("data/corpus")), std::string::npos) << describe(r);
  // The same prefix where the working directory has it validates.
  write_dataset((dir_ / "work" / "data" / "corpus").string());
  EXPECT_TRUE(check({"dataset.data_path=[data/corpus]"}).ok());
  // An absolute path is named as it is.
  const ValidationReport absolute = check({"dataset.data_path=[" + path("nope") + "]"});
  ASSERT_EQ(absolute.violations.size(), 1u);
  EXPECT_EQ(absolute.violations[0].message.find("relative to"), std::string::npos) << describe(absolute);

  const ValidationReport tokenizer =
      check({"dataset.data_path=[data/corpus]", "tokenizer.tokenizer_type=HuggingFaceTokenizer",
             "tokenizer.tokenizer_model=tok"});
  ASSERT_EQ(tokenizer.violations.size(), 1u) << describe(tokenizer);
  EXPECT_EQ(tokenizer.violations[0].message.rfind("tok" + relative_to + ": ", 0), 0u) << describe(tokenizer);
}

}  // namespace
}  // namespace sg::config
