#include "checkpoint/file_checksum.h"

#include <zlib.h>

#include <algorithm>

#include "core/strings.h"
#include "data/mapped_file.h"

namespace sg::checkpoint {

uint32_t crc32_update(uint32_t crc, const void* data, size_t size) {
  constexpr size_t kChunk = size_t{1} << 30;  // below zlib's uInt limit
  const auto* p = static_cast<const Bytef*>(data);
  uLong c = crc;
  while (size > 0) {
    const size_t n = std::min(size, kChunk);
    c = ::crc32(c, p, static_cast<uInt>(n));
    p += n;
    size -= n;
  }
  return static_cast<uint32_t>(c);
}

std::string crc32_hex(uint32_t crc) { return strprintf("%08x", crc); }

FileDigest file_digest(const std::string& path) {
  const data::MappedFile file(path, "checkpoint file");
  return {file.size(), crc32_update(0, file.data(), file.size())};
}

}  // namespace sg::checkpoint
