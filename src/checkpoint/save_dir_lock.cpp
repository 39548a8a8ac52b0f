#include "checkpoint/save_dir_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <utility>

#include "core/error.h"
#include "core/strings.h"

namespace sg::checkpoint {

namespace fs = std::filesystem;

namespace {

// Creates `dir` (and its parents); sg::Error naming `what` when a file is in the way or it fails.
void make_directory(const std::string& dir, const std::string& what) {
  std::error_code ec;
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec)) {
    throw Error(strprintf("%s %s is a file, not a directory; choose a directory path", what.c_str(),
                          dir.c_str()));
  }
  fs::create_directories(dir, ec);
  if (ec) {
    throw Error(strprintf("%s %s: cannot create the directory: %s", what.c_str(), dir.c_str(),
                          ec.message().c_str()));
  }
}

// The pid the holder wrote into the lock file, or "" when it cannot be read.
std::string holder_pid(int fd) {
  char buffer[32] = {};
  const ssize_t n = ::pread(fd, buffer, sizeof(buffer) - 1, 0);
  if (n <= 0) return "";
  return trim(std::string(buffer, static_cast<size_t>(n)));
}

}  // namespace

SaveDirLock SaveDirLock::acquire(const std::string& dir, const std::string& what, const std::string& harm) {
  make_directory(dir, what);
  const std::string path = (fs::path(dir) / kLockFile).string();
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0) {
    throw Error(strprintf("%s %s: cannot open the lock file %s: %s", what.c_str(), dir.c_str(),
                          path.c_str(), std::strerror(errno)));
  }
  if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    const std::string pid = holder_pid(fd);
    ::close(fd);
    if (err == EWOULDBLOCK) {
      // "choose another run folder (--run-dir)", not "another the run folder".
      const std::string other = what.rfind("the ", 0) == 0 ? what.substr(4) : what;
      throw Error(strprintf(
          "%s %s is in use by another stepgraph run (pid %s holds %s); %s. Wait for that run to end, or "
          "choose another %s",
          what.c_str(), dir.c_str(), pid.empty() ? "unknown" : pid.c_str(), path.c_str(), harm.c_str(), other.c_str()));
    }
    throw Error(strprintf("%s %s: cannot lock %s: %s", what.c_str(), dir.c_str(), path.c_str(),
                          std::strerror(err)));
  }
  // Ours now: record the pid for the message a second run prints.
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd, 0) != 0 || ::pwrite(fd, pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size())) {
    const int err = errno;
    ::close(fd);
    throw Error(strprintf("%s %s: cannot write the lock file %s: %s", what.c_str(), dir.c_str(),
                          path.c_str(), std::strerror(err)));
  }
  SaveDirLock lock;
  lock.dir_ = dir;
  lock.fd_ = fd;
  return lock;
}

SaveDirLock::~SaveDirLock() { release(); }

SaveDirLock::SaveDirLock(SaveDirLock&& other) noexcept
    : dir_(std::move(other.dir_)), fd_(std::exchange(other.fd_, -1)) {}

SaveDirLock& SaveDirLock::operator=(SaveDirLock&& other) noexcept {
  if (this != &other) {
    release();
    dir_ = std::move(other.dir_);
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

void SaveDirLock::release() noexcept {
  // The lock file stays (removing it would race with a run that just opened it), emptied so the
  // directory's contents do not change with every run; closing the descriptor drops the lock.
  if (fd_ >= 0) {
    (void)::ftruncate(fd_, 0);
    ::close(fd_);
  }
  fd_ = -1;
}

void check_directory_writable(const std::string& dir, const std::string& what) {
  make_directory(dir, what);
  const std::string probe =
      (fs::path(dir) / strprintf(".write-probe-%d", static_cast<int>(::getpid()))).string();
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    throw Error(strprintf("%s %s is not writable: cannot create a file in it: %s; choose a "
                          "writable directory",
                          what.c_str(), dir.c_str(), std::strerror(errno)));
  }
  const char byte = 0;
  const bool wrote = ::write(fd, &byte, 1) == 1 && ::fsync(fd) == 0;
  const int err = errno;
  ::close(fd);
  ::unlink(probe.c_str());
  if (!wrote) {
    throw Error(strprintf("%s %s is not writable: writing a probe file failed: %s", what.c_str(),
                          dir.c_str(), std::strerror(err)));
  }
}

}  // namespace sg::checkpoint
