// train/run_folder: an earlier run's files move to previous/run-<k>/ with their contents, numbered past the
// ones already there; a folder without records (none, or an empty metrics.jsonl) is left as it is; an
// archive that cannot be made is an error naming the run folder and the fix, and moves nothing; a resume
// continues the folder of its own run (or of an unnamed one) and moves another run's aside; a run's
// config.yaml names its run folder (an archived one's too); run ids are unique and survive run.json; a resume
// whose configuration changed keeps the folder's config.yaml (what a resume sets on purpose does not count); a
// branch from an old checkpoint of a long run keeps the records it cuts without holding them in memory.
#include "train/run_folder.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "config/config.h"
#include "core/error.h"
#include "process_memory.h"
#include "test_dir.h"

namespace sg::train {
namespace {

namespace fs = std::filesystem;

using test::read_file;

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

TEST_F(RunFolder, AResumesChangedConfigYamlIsKeptAndWhatTheResumeSetsDoesNotCount) {
  config::Config c;
  c.train.train_iters = 8;
  const std::string earlier = config::emit_yaml(c, "run it again with: stepgraph train runs/x/config.yaml");
  EXPECT_FALSE(keep_changed_config(dir_.string(), earlier).has_value());  // no config.yaml: nothing to keep
  std::ofstream(dir_ / "config.yaml") << earlier;
  EXPECT_FALSE(keep_changed_config(dir_.string(), earlier).has_value());

  // How a resume continues (as a stop's advice says), and the header's spelling of the folder, do not count.
  config::Config resumed = c;
  resumed.checkpoint.load = "/ck";
  resumed.checkpoint.auto_resume = true;
  resumed.checkpoint.overwrite = true;
  const std::string header = "run it again with: stepgraph train ./runs/x/config.yaml";
  EXPECT_FALSE(keep_changed_config(dir_.string(), config::emit_yaml(resumed, header)).has_value());
  EXPECT_FALSE(fs::exists(dir_ / "previous"));

  // Anything else does: the folder's config.yaml is kept in a new previous/run-<k>/ (past the ones there), alone;
  // the folder's own stays for the caller to replace.
  fs::create_directories(dir_ / "previous" / "run-1");
  config::Config longer = resumed;
  longer.train.train_iters = 16;
  auto kept = keep_changed_config(dir_.string(), config::emit_yaml(longer, header));
  ASSERT_TRUE(kept.has_value());
  EXPECT_EQ(fs::path(*kept), dir_ / "previous" / "run-2");
  EXPECT_EQ(read_file(fs::path(*kept) / "config.yaml"), earlier);
  EXPECT_FALSE(fs::exists(fs::path(*kept) / "run.json"));
  EXPECT_EQ(read_file(dir_ / "config.yaml"), earlier);
  // Other checkpoint keys count (where it saves is part of the run).
  config::Config elsewhere = c;
  elsewhere.checkpoint.save = "/other";
  kept = keep_changed_config(dir_.string(), config::emit_yaml(elsewhere));
  ASSERT_TRUE(kept.has_value());
  EXPECT_EQ(fs::path(*kept), dir_ / "previous" / "run-3");
}

// Found by tests/fuzz/run_records_fuzz.cpp: a line of spaces only under checkpoint: in the folder's config.yaml
// (an edit may leave one) threw std::out_of_range out of the comparison; it is blank, as an empty line is.
TEST_F(RunFolder, ALineOfSpacesInTheFoldersConfigYamlIsBlank) {
  const std::string yaml = "model:\n  num_layers: 2\ncheckpoint:\n  save: /ck\n";
  std::ofstream(dir_ / "config.yaml") << "model:\n  num_layers: 2\ncheckpoint:\n   \n  save: /ck\n";
  EXPECT_FALSE(keep_changed_config(dir_.string(), yaml).has_value());
  EXPECT_FALSE(keep_changed_config(dir_.string(), yaml + "  load: /other\n  overwrite: true\n").has_value());
  EXPECT_TRUE(keep_changed_config(dir_.string(), "model:\n  num_layers: 4\n").has_value());
}

// A resume from step 10 in the folder of a run that went on to step 250000 (~64 MB of records): the cut records
// stream into previous/run-1/metrics.jsonl (they were one string before: the peak resident memory rose by more
// than 64 MB), and no temporary is left.
TEST_F(RunFolder, ABranchFromAnOldCheckpointKeepsTheRecordsItCutsWithoutHoldingThemInMemory) {
  constexpr int64_t kSteps = 250'000, kResumeStep = 10;
  const auto record = [](int64_t step) {
    return "{\"step\": " + std::to_string(step) +
           ", \"loss\": 2.12345678, \"grad_norm\": 0.234567891, \"lr\": 0.000299999881, \"step_ms\": 1234.5678, "
           "\"tokens_per_s\": 3400000.0, \"tflops_per_gpu\": 400.123, \"mfu\": 0.40456, \"device_memory_used\": "
           "70000000000, \"wall_time_s\": 1234567.890, \"tokens\": " +
           std::to_string(step * 4194304) + "}\n";
  };
  write_run("long");
  std::string kept, cut;
  {
    std::ofstream out(dir_ / "metrics.jsonl", std::ios::binary | std::ios::trunc);
    for (int64_t step = 1; step <= kSteps; ++step) out << record(step);
  }
  for (int64_t step = 1; step <= kResumeStep; ++step) kept += record(step);
  const int64_t peak_before = test::peak_resident_bytes();
  const RecordsCut result = cut_records_after(dir_.string(), kResumeStep);
  const int64_t grown = test::peak_resident_bytes() - peak_before;
  if (!test::kSanitizedAllocator) {  // a sanitizer's allocator keeps freed memory resident
    EXPECT_LT(grown, 24 << 20) << "cutting " << kSteps - kResumeStep << " records raised the peak resident memory by "
                               << grown << " bytes";
  }
  EXPECT_EQ(result.records_after, static_cast<size_t>(kSteps - kResumeStep));
  EXPECT_EQ(result.last_step, kSteps);
  ASSERT_TRUE(result.kept_in.has_value());
  EXPECT_EQ(read_file(dir_ / "metrics.jsonl"), kept);
  // The cut records, whole and in order.
  std::ifstream in(fs::path(*result.kept_in) / "metrics.jsonl", std::ios::binary);
  std::string line;
  int64_t step = kResumeStep;
  while (std::getline(in, line)) {
    ++step;
    if (line + "\n" != record(step)) {
      ADD_FAILURE() << "line " << step - kResumeStep << " of the kept records: " << line;
      break;
    }
  }
  EXPECT_EQ(step, kSteps);
  EXPECT_EQ(read_file(fs::path(*result.kept_in) / "report.html"), "report of long");
  for (const auto& entry : fs::directory_iterator(dir_)) {
    EXPECT_EQ(entry.path().filename().string().find(".cut-"), std::string::npos) << entry.path() << " was left";
  }
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
