#pragma once
// One run per checkpoint directory: an exclusive flock(2) on DIR/.lock, held for the run's lifetime.
// Two runs saving into one directory would delete each other's in-progress .tmp folders and mix
// their iterations; the second run is refused at start instead, naming the holder's pid (written
// into the lock file). The kernel drops the lock when the process ends, however it ends, so a
// crashed run never leaves a stale lock behind.
#include <sys/types.h>

#include <filesystem>
#include <string>

namespace sg::checkpoint {

inline constexpr const char* kLockFile = ".lock";

class SaveDirLock {
 public:
  SaveDirLock() = default;
  // Creates DIR when missing and locks it. sg::Error when DIR cannot be created or the lock file
  // cannot be opened; sg::Error naming the holder's pid when another process holds the lock.
  // `what` names DIR's role in messages ("checkpoint.save"); `harm` says what two runs in it would do.
  static SaveDirLock acquire(const std::string& dir, const std::string& what,
                             const std::string& harm = "two runs saving into one directory destroy each "
                                                       "other's checkpoints");
  ~SaveDirLock();
  SaveDirLock(SaveDirLock&& other) noexcept;
  SaveDirLock& operator=(SaveDirLock&& other) noexcept;
  SaveDirLock(const SaveDirLock&) = delete;
  SaveDirLock& operator=(const SaveDirLock&) = delete;

  bool held() const { return fd_ >= 0; }
  const std::string& dir() const { return dir_; }

 private:
  void release() noexcept;
  std::string dir_;
  int fd_ = -1;
};

// Checks that `dir` (created when missing) takes new files: creates, writes, fsyncs and removes a
// probe file. sg::Error naming `what`, the directory and the reason (a file in the way, a read-only
// directory or filesystem, no space) so an unusable path fails before any step runs, not at the
// first save.
void check_directory_writable(const std::string& dir, const std::string& what);

}  // namespace sg::checkpoint
