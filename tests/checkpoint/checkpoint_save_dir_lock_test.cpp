// One run per checkpoint.save directory (issue 17): an exclusive flock on DIR/.lock that a second
// holder is refused, naming the first one's pid; and the writability probe that finds an unusable
// directory before any step runs.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "checkpoint/save_dir_lock.h"
#include "checkpoint_test_util.h"
#include "core/error.h"

namespace sg::checkpoint {
namespace {

namespace fs = std::filesystem;

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(SaveDirLock, ASecondHolderIsRefusedNamingTheFirstsPid) {
  test::ScratchDir dir("lock_second");
  const std::string save = dir.str() + "/ckpt";  // created by the lock
  SaveDirLock first = SaveDirLock::acquire(save, "checkpoint.save");
  ASSERT_TRUE(first.held());
  EXPECT_TRUE(fs::is_directory(save));
  const std::string msg = error_of([&] { SaveDirLock::acquire(save, "checkpoint.save"); });
  EXPECT_NE(msg.find("in use by another stepgraph run"), std::string::npos) << msg;
  EXPECT_NE(msg.find("pid " + std::to_string(::getpid())), std::string::npos) << msg;
  EXPECT_NE(msg.find(save), std::string::npos) << msg;

  // Another process is refused too (flock is per open file, so this is what two runs see).
  const pid_t child = ::fork();
  if (child == 0) {
    try {
      SaveDirLock::acquire(save, "checkpoint.save");
    } catch (const Error&) {
      ::_exit(7);
    }
    ::_exit(0);
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 7);

  // Released: the next run takes it, and the lock file no longer names a pid.
  first = SaveDirLock();
  std::ifstream lock_file(save + "/" + kLockFile);
  std::string content((std::istreambuf_iterator<char>(lock_file)), std::istreambuf_iterator<char>());
  EXPECT_EQ(content, "");
  EXPECT_EQ(error_of([&] { SaveDirLock again = SaveDirLock::acquire(save, "checkpoint.save"); }), "");
}

TEST(SaveDirLock, TheRefusalReadsWellForTheRunFolder) {
  test::ScratchDir dir("lock_run_folder");
  const std::string what = "the run folder (--run-dir)";
  SaveDirLock first = SaveDirLock::acquire(dir.str(), what);
  const std::string msg = error_of([&] { SaveDirLock::acquire(dir.str(), what); });
  EXPECT_NE(msg.find("or choose another run folder (--run-dir)"), std::string::npos) << msg;
  EXPECT_EQ(msg.find("another the"), std::string::npos) << msg;
  const std::string save = dir.str() + "/ckpt";
  SaveDirLock second = SaveDirLock::acquire(save, "checkpoint.save");
  EXPECT_NE(error_of([&] { SaveDirLock::acquire(save, "checkpoint.save"); }).find("choose another checkpoint.save"),
            std::string::npos);
}

TEST(SaveDirLock, ADeadHoldersLockIsFree) {
  test::ScratchDir dir("lock_dead");
  const pid_t child = ::fork();
  if (child == 0) {
    SaveDirLock held = SaveDirLock::acquire(dir.str(), "checkpoint.save");
    ::_exit(0);  // no destructor: the kernel drops the lock with the process
  }
  ::waitpid(child, nullptr, 0);
  EXPECT_EQ(error_of([&] { SaveDirLock l = SaveDirLock::acquire(dir.str(), "checkpoint.save"); }), "");
}

TEST(CheckDirectoryWritable, AFileInTheWayAndAReadOnlyDirectoryAreRefused) {
  test::ScratchDir dir("writable");
  EXPECT_EQ(error_of([&] { check_directory_writable(dir.str() + "/new/deeper", "checkpoint.save"); }), "");
  EXPECT_TRUE(fs::is_directory(dir.path / "new" / "deeper"));
  EXPECT_TRUE(fs::is_empty(dir.path / "new" / "deeper"));  // the probe is gone

  std::ofstream(dir.str() + "/a_file") << "x";
  std::string msg = error_of([&] { check_directory_writable(dir.str() + "/a_file", "checkpoint.save"); });
  EXPECT_NE(msg.find("checkpoint.save " + dir.str() + "/a_file is a file, not a directory"), std::string::npos) << msg;
  msg = error_of([&] { SaveDirLock::acquire(dir.str() + "/a_file", "checkpoint.save"); });
  EXPECT_NE(msg.find("is a file, not a directory"), std::string::npos) << msg;

  // Root writes into a mode-0555 directory, so under root (CI) the read-only directory is one of procfs's.
  const bool root = ::geteuid() == 0;
  const std::string read_only = root ? "/proc/self/fdinfo" : dir.str() + "/read_only";
  if (!root) {
    fs::create_directories(read_only);
    ::chmod(read_only.c_str(), 0555);
  }
  msg = error_of([&] { check_directory_writable(read_only, "checkpoint.save"); });
  if (!root) ::chmod(read_only.c_str(), 0755);
  EXPECT_NE(msg.find("checkpoint.save " + read_only + " is not writable"), std::string::npos) << msg;
}

}  // namespace
}  // namespace sg::checkpoint
