// Checkpoint retention (checkpoint/retention.h, Megatron-Bridge's checkpoint.most_recent_k): the k newest iteration
// folders stay, and so do the one `latest` names and pinned ones; a folder is renamed out of the iteration-name
// pattern before a byte of it is removed, so a crash in the middle leaves no half folder that a resume or a listing
// could take for a checkpoint, and the next pass removes what it left; a folder that cannot be removed is reported,
// the others still go.
#include "checkpoint/retention.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "checkpoint/checkpoint_dir.h"
#include "checkpoint/durable_io.h"
#include "checkpoint_test_util.h"
#include "core/error.h"

namespace sg::checkpoint {
namespace {

namespace fs = std::filesystem;

using test::Fixture;

// DIR with a saved checkpoint at each of `iterations` (latest: the last one).
void save_all(const std::string& dir, const std::vector<int64_t>& iterations) {
  for (const int64_t it : iterations) save_checkpoint(dir, it, Fixture(it).contents());
}

// The names in DIR, sorted, without the lock or latest file.
std::vector<std::string> entries(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name != kLatestFile && name != ".lock") out.push_back(name);
  }
  std::sort(out.begin(), out.end());
  return out;
}

TEST(CheckpointRetention, TheNamesOfAFolderBeingRemoved) {
  EXPECT_EQ(removal_dir_name(100), "iter_0000100.removing");
  EXPECT_TRUE(is_removal_leftover("iter_0000100.removing"));
  for (const char* other : {"iter_0000100", "iter_0000100.tmp-12", "iter_0000100.old-12", "iter_.removing",
                            "iter_12a.removing", "x.removing", "iter_0000100.removing.tmp-1"}) {
    EXPECT_FALSE(is_removal_leftover(other)) << other;
  }
}

TEST(CheckpointRetention, KeepsTheKNewestAndRemovesTheRest) {
  test::ScratchDir dir("retention_k");
  save_all(dir.str(), {10, 20, 30, 40, 50});
  RetentionResult r = remove_old_iterations(dir.str(), 2);
  EXPECT_EQ(r.removed, (std::vector<int64_t>{10, 20, 30}));
  EXPECT_EQ(r.kept, (std::vector<int64_t>{40, 50}));
  EXPECT_TRUE(r.failures.empty()) << r.failures.front();
  EXPECT_TRUE(r.leftovers.empty());
  EXPECT_EQ(entries(dir.str()), (std::vector<std::string>{"iter_0000040", "iter_0000050"}));
  EXPECT_EQ(read_latest_iteration(dir.str()), 50);
  // A second pass has nothing left to remove; k larger than the folders, or -1, removes nothing.
  r = remove_old_iterations(dir.str(), 2);
  EXPECT_TRUE(r.removed.empty());
  EXPECT_EQ(r.kept, (std::vector<int64_t>{40, 50}));
  EXPECT_TRUE(remove_old_iterations(dir.str(), 5).removed.empty());
  EXPECT_TRUE(remove_old_iterations(dir.str(), -1).removed.empty());
  EXPECT_EQ(list_iterations(dir.str()), (std::vector<int64_t>{40, 50}));
  // What stays loads.
  EXPECT_EQ(resolve_checkpoint(dir.str()), dir.str() + "/iter_0000050");
  EXPECT_NO_THROW(verify_checkpoint_folder(dir.str() + "/iter_0000040", {}));
}

// `latest` names a whole checkpoint at every moment: the folder it names is never removed, even when it is not among
// the k newest; pinned folders stay too.
TEST(CheckpointRetention, TheFolderLatestNamesAndPinnedFoldersAreNeverRemoved) {
  test::ScratchDir dir("retention_latest");
  save_all(dir.str(), {10, 20, 30, 40});
  std::ofstream(dir.str() + "/" + kLatestFile) << "20\n";  // `latest` behind the newest folder
  RetentionResult r = remove_old_iterations(dir.str(), 1, /*pinned=*/{10});
  EXPECT_EQ(r.removed, (std::vector<int64_t>{30}));
  EXPECT_EQ(r.kept, (std::vector<int64_t>{10, 20, 40}));
  EXPECT_EQ(resolve_checkpoint(dir.str()), dir.str() + "/iter_0000020");
  // Without a latest file which folder is whole is unknown: nothing is removed, and the failure says why.
  fs::remove(dir.str() + "/" + kLatestFile);
  r = remove_old_iterations(dir.str(), 1);
  EXPECT_TRUE(r.removed.empty());
  ASSERT_EQ(r.failures.size(), 1u);
  EXPECT_NE(r.failures[0].find("no iteration folder removed"), std::string::npos) << r.failures[0];
  EXPECT_NE(r.failures[0].find(kLatestFile), std::string::npos) << r.failures[0];
  // An unreadable latest file likewise.
  std::ofstream(dir.str() + "/" + kLatestFile) << "garbage\n";
  r = remove_old_iterations(dir.str(), 1);
  EXPECT_TRUE(r.removed.empty());
  ASSERT_EQ(r.failures.size(), 1u);
  EXPECT_NE(r.failures[0].find("expected an iteration number"), std::string::npos) << r.failures[0];
  EXPECT_EQ(list_iterations(dir.str()), (std::vector<int64_t>{10, 20, 40}));
}

// A removal in a child process that kills itself (SIGKILL: no cleanup) where `hooks` says; whether it died so.
bool crash_during_removal(const std::string& dir, int64_t keep, const RetentionHooks& hooks) {
  const pid_t pid = ::fork();
  if (pid == 0) {
    remove_old_iterations(dir, keep, {}, hooks);
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL;
}

// Killed halfway through removing a folder's files, or between two folders' renames: the half-removed folder is no
// iteration folder any more, so nothing lists, resolves or resumes it, and the next pass removes it.
TEST(CheckpointRetention, ACrashInTheMiddleLeavesNoHalfCheckpointAndTheNextPassCleansUp) {
  test::ScratchDir dir("retention_crash");
  save_all(dir.str(), {10, 20, 30});
  // Inside the removal of iter_0000010: some of its files already gone.
  const bool killed =
      crash_during_removal(dir.str(), 1, {.on_stage = [](const std::string& stage, const std::string& path) {
                             if (stage != "remove") return;
                             fs::remove(path + "/" + kModelFile);
                             fs::remove(path + "/" + kTrainStateFile);
                             ::raise(SIGKILL);
                           }});
  ASSERT_TRUE(killed);
  // Both old folders were renamed before a byte was removed.
  EXPECT_EQ(entries(dir.str()),
            (std::vector<std::string>{"iter_0000010.removing", "iter_0000020.removing", "iter_0000030"}));
  EXPECT_EQ(list_iterations(dir.str()), (std::vector<int64_t>{30}));
  EXPECT_EQ(resolve_checkpoint(dir.str()), dir.str() + "/iter_0000030");
  EXPECT_TRUE(iteration_folders_hint(dir.str()).find(".removing") == std::string::npos);
  // Even without its latest file, the directory resumes its newest whole iteration, not a leftover.
  fs::remove(dir.str() + "/" + kLatestFile);
  EXPECT_EQ(find_checkpoint_folder(dir.str()).path, dir.str() + "/iter_0000030");
  write_file_atomically(dir.str() + "/" + kLatestFile, "30\n");

  // The next pass (any k) removes the leftovers first and says so.
  const RetentionResult r = remove_old_iterations(dir.str(), -1);
  EXPECT_EQ(r.leftovers, (std::vector<std::string>{"iter_0000010.removing", "iter_0000020.removing"}));
  EXPECT_TRUE(r.removed.empty());
  EXPECT_TRUE(r.failures.empty());
  EXPECT_EQ(entries(dir.str()), (std::vector<std::string>{"iter_0000030"}));

  // Killed after the first of two renames: one leftover, one whole iteration folder still listed as one.
  save_all(dir.str(), {40, 50});
  ASSERT_TRUE(crash_during_removal(dir.str(), 1, {.on_stage = [](const std::string& stage, const std::string& path) {
                                     if (stage == "rename" && path.find("iter_0000040") != std::string::npos) {
                                       ::raise(SIGKILL);
                                     }
                                   }}));
  EXPECT_EQ(entries(dir.str()), (std::vector<std::string>{"iter_0000030.removing", "iter_0000040", "iter_0000050"}));
  const RetentionResult again = remove_old_iterations(dir.str(), 1);
  EXPECT_EQ(again.leftovers, (std::vector<std::string>{"iter_0000030.removing"}));
  EXPECT_EQ(again.removed, (std::vector<int64_t>{40}));
  EXPECT_EQ(entries(dir.str()), (std::vector<std::string>{"iter_0000050"}));
}

// checkpoint.overwrite's wipe removes an interrupted removal's leftovers with everything else of a checkpoint.
TEST(CheckpointRetention, RemoveCheckpointsTakesTheLeftoversToo) {
  test::ScratchDir dir("retention_overwrite");
  save_all(dir.str(), {10, 20});
  fs::rename(dir.str() + "/iter_0000010", dir.str() + "/iter_0000010.removing");
  std::ofstream(dir.str() + "/notes.txt") << "mine\n";
  remove_checkpoints(dir.str());
  EXPECT_EQ(entries(dir.str()), (std::vector<std::string>{"notes.txt"}));
}

// A folder that cannot be removed is reported with its path and the reason; the other folders still go, and a folder
// whose rename failed is still a whole checkpoint, kept.
TEST(CheckpointRetention, AFolderThatCannotBeRemovedIsReportedAndTheOthersStillGo) {
  test::ScratchDir dir("retention_fail");
  save_all(dir.str(), {10, 20, 30, 40});
  const RetentionHooks failing{.on_stage = [](const std::string& stage, const std::string& path) {
    if (stage == "rename" && path.ends_with("iter_0000010")) throw Error("injected rename failure");
    if (stage == "remove" && path.ends_with("iter_0000020.removing")) throw Error("injected removal failure");
  }};
  RetentionResult r = remove_old_iterations(dir.str(), 1, {}, failing);
  EXPECT_EQ(r.removed, (std::vector<int64_t>{30}));
  EXPECT_EQ(r.kept, (std::vector<int64_t>{10, 40}));
  ASSERT_EQ(r.failures.size(), 2u);
  EXPECT_EQ(r.failures[0], "cannot rename " + dir.str() + "/iter_0000010 to " + dir.str() +
                               "/iter_0000010.removing: injected rename failure");
  EXPECT_EQ(r.failures[1], "cannot remove " + dir.str() + "/iter_0000020.removing: injected removal failure");
  EXPECT_EQ(entries(dir.str()), (std::vector<std::string>{"iter_0000010", "iter_0000020.removing", "iter_0000040"}));
  EXPECT_NO_THROW(verify_checkpoint_folder(dir.str() + "/iter_0000010", {}));

  // Once the cause is gone, the next pass finishes both.
  r = remove_old_iterations(dir.str(), 1);
  EXPECT_EQ(r.leftovers, (std::vector<std::string>{"iter_0000020.removing"}));
  EXPECT_EQ(r.removed, (std::vector<int64_t>{10}));
  EXPECT_TRUE(r.failures.empty());
  EXPECT_EQ(entries(dir.str()), (std::vector<std::string>{"iter_0000040"}));
}

// The same with the filesystem's own refusal: a save directory the process may not write to (root may, so the test
// is skipped there; the hooks above inject failures for every user).
TEST(CheckpointRetention, AReadOnlySaveDirectoryIsReportedWithTheSystemsReason) {
  if (::geteuid() == 0) GTEST_SKIP() << "root ignores directory permissions";
  test::ScratchDir dir("retention_readonly");
  save_all(dir.str(), {10, 20});
  ASSERT_EQ(::chmod(dir.str().c_str(), 0555), 0);
  const RetentionResult r = remove_old_iterations(dir.str(), 1);
  ::chmod(dir.str().c_str(), 0755);
  EXPECT_TRUE(r.removed.empty());
  ASSERT_EQ(r.failures.size(), 1u);
  EXPECT_NE(r.failures[0].find("iter_0000010"), std::string::npos) << r.failures[0];
  EXPECT_NE(r.failures[0].find("Permission denied"), std::string::npos) << r.failures[0];
  EXPECT_EQ(list_iterations(dir.str()), (std::vector<int64_t>{10, 20}));
}

}  // namespace
}  // namespace sg::checkpoint
