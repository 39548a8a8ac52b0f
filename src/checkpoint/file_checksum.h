#pragma once
// Checksums of checkpoint files: CRC-32 (zlib's crc32, the polynomial of gzip, PNG and Python's
// zlib.crc32), recorded per file in train_state.json at save and verified at load, so a bit flip
// or a partial copy is refused instead of loaded. zlib is a well-kept library and its
// slicing-by-N implementation reads several GB/s, which keeps verification a small share of a load.
#include <cstddef>
#include <cstdint>
#include <string>

namespace sg::checkpoint {

// The CRC-32 of `size` bytes after `crc` (0 to start); any size (zlib takes 32-bit lengths: chunked).
uint32_t crc32_update(uint32_t crc, const void* data, size_t size);

// "1a2b3c4d": eight lower-case hex digits, as train_state.json stores them.
std::string crc32_hex(uint32_t crc);

struct FileDigest {
  uint64_t bytes = 0;
  uint32_t crc32 = 0;
  bool operator==(const FileDigest&) const = default;
};

// The digest of a whole file (memory-mapped); sg::Error naming the path when it cannot be read.
FileDigest file_digest(const std::string& path);

}  // namespace sg::checkpoint
