#pragma once
// A read-only memory map of a whole file (RAII). Used for Megatron .bin/.idx files and safetensors
// checkpoints: the OS pages data in on demand, so opening a large corpus costs no copy.
#include <cstddef>
#include <cstdint>
#include <string>

namespace sg::data {

class MappedFile {
 public:
  MappedFile() = default;
  // Maps `path` read-only. Throws sg::Error naming the path when it is missing or unreadable.
  // `what` describes the file in messages ("index file", "checkpoint") so the user knows its role.
  explicit MappedFile(const std::string& path, const char* what = "file");
  ~MappedFile();
  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  const std::string& path() const { return path_; }

 private:
  void release();
  std::string path_;
  const uint8_t* data_ = nullptr;  // nullptr for an empty file (mmap of 0 bytes is not allowed)
  size_t size_ = 0;
};

}  // namespace sg::data
