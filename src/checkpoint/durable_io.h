#pragma once
// File writes that survive a crash: fsync the file, then the directory that names it.
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace sg::checkpoint {

// Streams bytes to a new file descriptor-backed file and fsyncs it on close().
class DurableFileWriter {
 public:
  using Hook = std::function<void(const std::string& path, uint64_t written, uint64_t total)>;
  // Creates (truncates) `path`. `total` is the expected size, reported to the hook.
  DurableFileWriter(const std::string& path, uint64_t total, Hook hook = nullptr);
  ~DurableFileWriter();  // closes without fsync if close() was not called (error paths)
  DurableFileWriter(const DurableFileWriter&) = delete;
  DurableFileWriter& operator=(const DurableFileWriter&) = delete;

  void write(const void* data, uint64_t size);  // in chunks; the hook runs after each chunk
  void close();                                 // fsync + close; sg::Error on failure
  // What was written so far: byte count and CRC-32 (checkpoint/file_checksum.h), computed while
  // writing so a checkpoint's checksums cost no second pass over the data.
  uint64_t written() const { return written_; }
  uint32_t crc32() const { return crc32_; }

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t written_ = 0;
  uint64_t total_ = 0;
  uint32_t crc32_ = 0;
  Hook hook_;
};

void fsync_directory(const std::string& dir);
// `path` gets `content` atomically: written to a temporary name beside it, fsynced, renamed over
// `path`, and the directory fsynced. A reader sees the old or the new content, never a mix.
void write_file_atomically(const std::string& path, std::string_view content);
// The same, for content too large to hold in memory: `write` streams it into the temporary's writer. When it
// returns false, the temporary is removed and `path` stays as it was (nothing to replace); when it throws, nothing
// is left behind either. Returns whether `path` was replaced.
bool replace_file_atomically(const std::string& path, const std::function<bool(DurableFileWriter&)>& write);
// sg::Error naming the path when it is missing or not a regular file (a FIFO would block the read,
// a directory reads as empty).
std::string read_text_file(const std::string& path);

}  // namespace sg::checkpoint
