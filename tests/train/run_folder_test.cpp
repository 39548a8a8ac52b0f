// train/run_folder: an earlier run's files move to previous/run-<k>/ with their contents, numbered past the
// ones already there; a folder without records (none, or an empty metrics.jsonl) is left as it is; an
// archive that cannot be made is an error naming the run folder and the fix, and moves nothing; a resume
// continues the folder of its own run (or of an unnamed one) and moves another run's aside; a run's
// config.yaml names its run folder (an archived one's too); run ids are unique and survive run.json.
#include "train/run_folder.h"

#include <gtest/gtest.h>
#include <unistd.h>

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

class RunFolder : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = sg::test::fresh_test_dir("run_folder_test", fs::current_path());
  }
  void TearDown() override {
    if (!HasFailure()) fs::remove_all(dir_);
  }
  void write_run(const std::string& tag) {
    std::ofstream(dir_ / "config.yaml") << "config of " << tag;
    std::ofstream(dir_ / "metrics.jsonl") << "{\"step\": 1, \"run\": \"" << tag << "\"}\n";
    std::ofstream(dir_ / "report.html") << "report of " << tag;
    write_run_id(dir_.string(), tag);
  }
  fs::path dir_;
};

TEST_F(RunFolder, MovesTheRunsFilesAsideAndNumbersEachEarlierRun) {
  write_run("first");
  fs::create_directories(dir_ / "rank1");  // another rank's folder stays where it is
  const auto first = keep_earlier_run(dir_.string());
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(fs::path(*first), dir_ / "previous" / "run-1");
  for (const char* name : kRunFolderFiles) EXPECT_FALSE(fs::exists(dir_ / name)) << name;
  EXPECT_EQ(read_file(dir_ / "previous" / "run-1" / "config.yaml"), "config of first");
  EXPECT_EQ(read_file(dir_ / "previous" / "run-1" / "metrics.jsonl"), "{\"step\": 1, \"run\": \"first\"}\n");
  EXPECT_EQ(read_file(dir_ / "previous" / "run-1" / "report.html"), "report of first");
  EXPECT_EQ(read_run_id((dir_ / "previous" / "run-1").string()), "first");
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

TEST_F(RunFolder, LeavesAFolderWithoutRecordsAsItIs) {
  EXPECT_FALSE(keep_earlier_run((dir_ / "missing").string()).has_value());
  EXPECT_FALSE(keep_earlier_run(dir_.string()).has_value());  // empty folder
  std::ofstream(dir_ / "config.yaml") << "a run that ended before its first step";
  std::ofstream(dir_ / "metrics.jsonl");  // empty
  EXPECT_FALSE(keep_earlier_run(dir_.string()).has_value());
  EXPECT_TRUE(fs::exists(dir_ / "config.yaml"));
  EXPECT_FALSE(fs::exists(dir_ / "previous"));
}

TEST_F(RunFolder, AnArchiveThatCannotBeMadeIsAnErrorNamingTheFolderAndTheFix) {
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

TEST_F(RunFolder, AResumeContinuesItsOwnRunsFolderAndMovesAnotherRunsAside) {
  write_run("run-a");
  // Fresh: the earlier run moves aside, whatever its id.
  RunFolderStart start = start_run_folder(dir_.string(), std::nullopt);
  EXPECT_FALSE(start.continues);
  ASSERT_TRUE(start.archived_to.has_value());
  EXPECT_EQ(read_run_id(*start.archived_to), "run-a");

  write_run("run-b");
  // A resume of the run that wrote the folder continues it.
  start = start_run_folder(dir_.string(), std::string("run-b"));
  EXPECT_TRUE(start.continues);
  EXPECT_FALSE(start.archived_to.has_value());
  EXPECT_EQ(read_file(dir_ / "config.yaml"), "config of run-b");
  // A checkpoint from before run ids: continues, as before.
  start = start_run_folder(dir_.string(), std::string());
  EXPECT_TRUE(start.continues);
  // A resume of run-a while the folder holds run-b's records: run-b's move aside and run-a's come back from
  // previous/run-1/ to continue.
  start = start_run_folder(dir_.string(), std::string("run-a"));
  EXPECT_TRUE(start.continues);
  ASSERT_TRUE(start.archived_to.has_value());
  EXPECT_EQ(fs::path(*start.archived_to), dir_ / "previous" / "run-2");
  ASSERT_TRUE(start.restored_from.has_value());
  EXPECT_EQ(fs::path(*start.restored_from), dir_ / "previous" / "run-1");
  EXPECT_FALSE(fs::exists(dir_ / "previous" / "run-1"));
  EXPECT_EQ(read_file(dir_ / "previous" / "run-2" / "metrics.jsonl"), "{\"step\": 1, \"run\": \"run-b\"}\n");
  EXPECT_EQ(read_file(dir_ / "metrics.jsonl"), "{\"step\": 1, \"run\": \"run-a\"}\n");
  EXPECT_EQ(read_run_id(dir_.string()), "run-a");
  // A resume of a run whose records are nowhere here (run-c): run-a's move aside, run-c starts the folder anew.
  start = start_run_folder(dir_.string(), std::string("run-c"));
  EXPECT_FALSE(start.continues);
  EXPECT_FALSE(start.restored_from.has_value());
  ASSERT_TRUE(start.archived_to.has_value());
  EXPECT_EQ(read_run_id(*start.archived_to), "run-a");
  EXPECT_FALSE(fs::exists(dir_ / "metrics.jsonl"));

  // A folder whose records predate run ids (no run.json) continues any resume.
  write_run("old");
  fs::remove(dir_ / "run.json");
  EXPECT_TRUE(start_run_folder(dir_.string(), std::string("run-a")).continues);

  // A folder without records (emptied by hand) gets the resumed run's own records back from previous/.
  for (const char* name : kRunFolderFiles) fs::remove(dir_ / name);
  start = start_run_folder(dir_.string(), std::string("run-a"));
  EXPECT_TRUE(start.continues);
  EXPECT_FALSE(start.archived_to.has_value());
  ASSERT_TRUE(start.restored_from.has_value());
  EXPECT_EQ(read_run_id(dir_.string()), "run-a");
}

TEST_F(RunFolder, ARunsOwnConfigYamlNamesItsRunFolder) {
  write_run("a");
  EXPECT_EQ(run_folder_of_config((dir_ / "config.yaml").string()), dir_.string());
  // An archived run's config.yaml belongs to the folder it was archived from.
  const auto archived = keep_earlier_run(dir_.string());
  ASSERT_TRUE(archived.has_value());
  EXPECT_EQ(fs::path(*run_folder_of_config((fs::path(*archived) / "config.yaml").string())).lexically_normal(),
            dir_.lexically_normal());
  // Any other YAML file, or a config.yaml without run.json beside it, is a recipe file like any other.
  std::ofstream(dir_ / "mine.yaml") << "x";
  EXPECT_FALSE(run_folder_of_config((dir_ / "mine.yaml").string()).has_value());
  fs::create_directories(dir_ / "plain");
  std::ofstream(dir_ / "plain" / "config.yaml") << "x";
  EXPECT_FALSE(run_folder_of_config((dir_ / "plain" / "config.yaml").string()).has_value());
}

TEST_F(RunFolder, RunIdsAreUniqueAndRoundTripThroughRunJson) {
  const std::string a = new_run_id(), b = new_run_id();
  EXPECT_NE(a, b);
  EXPECT_EQ(a.size(), std::string("20261202T073501Z-").size() + std::to_string(::getpid()).size() + 9) << a;
  write_run_id(dir_.string(), a);
  EXPECT_EQ(read_run_id(dir_.string()), a);
  std::ofstream(dir_ / "run.json") << "{not json";
  EXPECT_FALSE(read_run_id(dir_.string()).has_value());
  EXPECT_FALSE(read_run_id((dir_ / "missing").string()).has_value());
}

}  // namespace
}  // namespace sg::train
