#include "checkpoint/durable_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "checkpoint/file_checksum.h"
#include "core/strings.h"

namespace sg::checkpoint {

namespace {
constexpr uint64_t kWriteChunk = uint64_t{4} << 20;  // 4 MiB: progress granularity for the hook
}

DurableFileWriter::DurableFileWriter(const std::string& path, uint64_t total, Hook hook)
    : path_(path), total_(total), hook_(std::move(hook)) {
  fd_ = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) throw Error(strprintf("cannot create %s: %s", path.c_str(), std::strerror(errno)));
}

DurableFileWriter::~DurableFileWriter() {
  if (fd_ >= 0) ::close(fd_);
}

void DurableFileWriter::write(const void* data, uint64_t size) {
  const auto* p = static_cast<const uint8_t*>(data);
  uint64_t done = 0;
  while (done < size) {
    const uint64_t chunk = std::min(kWriteChunk, size - done);
    uint64_t chunk_done = 0;
    while (chunk_done < chunk) {
      const ssize_t n = ::write(fd_, p + done + chunk_done, chunk - chunk_done);
      if (n < 0) {
        if (errno == EINTR) continue;
        throw Error(strprintf("cannot write %s: %s (is the disk full?)", path_.c_str(),
                              std::strerror(errno)));
      }
      chunk_done += static_cast<uint64_t>(n);
    }
    crc32_ = crc32_update(crc32_, p + done, chunk);
    done += chunk;
    written_ += chunk;
    if (hook_) hook_(path_, written_, total_);
  }
}

void DurableFileWriter::close() {
  if (fd_ < 0) return;
  const int fd = fd_;
  fd_ = -1;
  if (::fsync(fd) != 0) {
    const int err = errno;
    ::close(fd);
    throw Error(strprintf("cannot fsync %s: %s", path_.c_str(), std::strerror(err)));
  }
  if (::close(fd) != 0)
    throw Error(strprintf("cannot close %s: %s", path_.c_str(), std::strerror(errno)));
}

void fsync_directory(const std::string& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    throw Error(strprintf("cannot open directory %s: %s", dir.c_str(), std::strerror(errno)));
  const int rc = ::fsync(fd);
  const int err = errno;
  ::close(fd);
  if (rc != 0)
    throw Error(strprintf("cannot fsync directory %s: %s", dir.c_str(), std::strerror(err)));
}

void write_file_atomically(const std::string& path, std::string_view content) {
  replace_file_atomically(path, [content](DurableFileWriter& writer) {
    writer.write(content.data(), content.size());
    return true;
  });
}

bool replace_file_atomically(const std::string& path, const std::function<bool(DurableFileWriter&)>& write) {
  const size_t slash = path.find_last_of('/');
  const std::string dir =
      slash == std::string::npos ? "." : (slash == 0 ? "/" : path.substr(0, slash));
  const std::string tmp = strprintf("%s.tmp-%d", path.c_str(), static_cast<int>(::getpid()));
  try {
    DurableFileWriter writer(tmp, 0);
    if (!write(writer)) {
      std::remove(tmp.c_str());
      return false;
    }
    writer.close();
  } catch (...) {
    std::remove(tmp.c_str());  // a failed write (disk full) leaves nothing behind
    throw;
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int err = errno;
    std::remove(tmp.c_str());
    throw Error(
        strprintf("cannot rename %s to %s: %s", tmp.c_str(), path.c_str(), std::strerror(err)));
  }
  fsync_directory(dir);
  return true;
}

std::string read_text_file(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    throw Error(strprintf("cannot open %s: %s", path.c_str(), std::strerror(errno)));
  }
  if (!S_ISREG(st.st_mode)) {
    throw Error(strprintf("%s is %s, not a regular file", path.c_str(),
                          S_ISDIR(st.st_mode) ? "a directory" : S_ISFIFO(st.st_mode) ? "a FIFO" : "a special file"));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(strprintf("cannot open %s: %s", path.c_str(), std::strerror(errno)));
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace sg::checkpoint
