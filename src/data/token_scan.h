#pragma once
// The scan every open of an indexed corpus makes (IndexedDataset::open): the smallest and largest token id of the
// .bin's token array and the first id outside the allowed range. The array is split into chunks that a few threads
// take in order, each reduced by a tight loop the compiler vectorizes; only when a chunk holds a bad id is that
// chunk walked token by token to find the first one. A scan that runs long prints a progress line to the log every
// few seconds; small corpora stay on the calling thread and print nothing.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "data/indexed_dataset.h"

namespace sg::data {

struct TokenScan {
  int64_t min_token = 0;  // both 0 for no tokens
  int64_t max_token = 0;
  // The first token (lowest index) outside the allowed range; min/max are then partial.
  std::optional<uint64_t> first_bad;
  int64_t bad_token = 0;  // its id
};

struct TokenScanOptions {
  std::string label;  // the file in progress lines ("scanning <label>: ...")
  // Tests: force the split (0: chosen by scan_threads and kScanChunkBytes).
  unsigned threads = 0;
  uint64_t chunk_tokens = 0;
  // Progress lines: the first after `progress_after_s`, then at most one every `progress_every_s`; to log::info
  // unless `progress` is set.
  double progress_after_s = 5.0;
  double progress_every_s = 5.0;
  std::function<void(const std::string&)> progress;
};

// Chunks a thread takes at a time; at least this much work a thread (smaller corpora use fewer threads).
inline constexpr uint64_t kScanChunkBytes = uint64_t{16} << 20;
inline constexpr uint64_t kScanBytesPerThread = uint64_t{64} << 20;
inline constexpr unsigned kScanMaxThreads = 16;

// Tokens of one chunk of a scan of `dtype` tokens: options.chunk_tokens, else kScanChunkBytes' worth.
uint64_t scan_chunk_tokens(TokenDtype dtype, const TokenScanOptions& options);

// Threads for `bytes` of tokens on a machine of `hardware` threads: min(hardware, 16, bytes / 64 MiB), at least 1.
unsigned scan_threads(uint64_t bytes, unsigned hardware);

// Scans `num_tokens` tokens of integer `dtype` at `data` (little-endian, back to back) against
// [allowed_min, allowed_max].
TokenScan scan_token_array(TokenDtype dtype, const uint8_t* data, uint64_t num_tokens, int64_t allowed_min,
                           int64_t allowed_max, const TokenScanOptions& options = {});

}  // namespace sg::data
