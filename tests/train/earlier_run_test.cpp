// keep_earlier_run: an earlier run's files move to previous/run-<k>/ with their contents, numbered past the
// ones already there; a folder without records (none, or an empty metrics.jsonl) is left as it is; a
// folder that cannot be created is an error naming the run folder and the fix, and moves nothing.
#include "train/earlier_run.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "core/error.h"
#include "test_dir.h"

namespace sg::train {
namespace {

namespace fs = std::filesystem;

std::string read_file(const fs::path& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class EarlierRun : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = sg::test::fresh_test_dir("earlier_run_test", fs::current_path());
  }
  void TearDown() override {
    if (!HasFailure()) fs::remove_all(dir_);
  }
  void write_run(const std::string& tag) {
    std::ofstream(dir_ / "config.yaml") << "config of " << tag;
    std::ofstream(dir_ / "metrics.jsonl") << "{\"step\": 1, \"run\": \"" << tag << "\"}\n";
    std::ofstream(dir_ / "report.html") << "report of " << tag;
  }
  fs::path dir_;
};

TEST_F(EarlierRun, MovesTheThreeFilesAsideAndNumbersEachEarlierRun) {
  write_run("first");
  fs::create_directories(dir_ / "rank1");  // another rank's folder stays where it is
  const auto first = keep_earlier_run(dir_.string());
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(fs::path(*first), dir_ / "previous" / "run-1");
  for (const char* name : kRunFolderFiles) EXPECT_FALSE(fs::exists(dir_ / name)) << name;
  EXPECT_EQ(read_file(dir_ / "previous" / "run-1" / "config.yaml"), "config of first");
  EXPECT_EQ(read_file(dir_ / "previous" / "run-1" / "metrics.jsonl"), "{\"step\": 1, \"run\": \"first\"}\n");
  EXPECT_EQ(read_file(dir_ / "previous" / "run-1" / "report.html"), "report of first");
  EXPECT_TRUE(fs::is_directory(dir_ / "rank1"));

  write_run("second");
  fs::remove(dir_ / "report.html");  // a run killed before its report: the other two still move
  const auto second = keep_earlier_run(dir_.string());
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(fs::path(*second), dir_ / "previous" / "run-2");
  EXPECT_EQ(read_file(dir_ / "previous" / "run-2" / "config.yaml"), "config of second");
  EXPECT_FALSE(fs::exists(dir_ / "previous" / "run-2" / "report.html"));
  EXPECT_EQ(read_file(dir_ / "previous" / "run-1" / "config.yaml"), "config of first");  // untouched
}

TEST_F(EarlierRun, LeavesAFolderWithoutRecordsAsItIs) {
  EXPECT_FALSE(keep_earlier_run((dir_ / "missing").string()).has_value());
  EXPECT_FALSE(keep_earlier_run(dir_.string()).has_value());  // empty folder
  std::ofstream(dir_ / "config.yaml") << "a run that ended before its first step";
  std::ofstream(dir_ / "metrics.jsonl");  // empty
  EXPECT_FALSE(keep_earlier_run(dir_.string()).has_value());
  EXPECT_TRUE(fs::exists(dir_ / "config.yaml"));
  EXPECT_FALSE(fs::exists(dir_ / "previous"));
}

TEST_F(EarlierRun, AnArchiveThatCannotBeMadeIsAnErrorNamingTheFolderAndTheFix) {
  write_run("first");
  std::ofstream(dir_ / "previous") << "a file where the archive folder goes";  // fails for root too
  try {
    keep_earlier_run(dir_.string());
    FAIL() << "expected an error";
  } catch (const Error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find(dir_.string()), std::string::npos) << what;
    EXPECT_NE(what.find("--run-dir"), std::string::npos) << what;
  }
  EXPECT_EQ(read_file(dir_ / "metrics.jsonl"), "{\"step\": 1, \"run\": \"first\"}\n");  // nothing lost
}

}  // namespace
}  // namespace sg::train
