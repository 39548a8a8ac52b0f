#pragma once
// The token scan of a corpus (data/token_scan.h), shared by the processes of a data-parallel run: each scans one
// contiguous part of the token array, one process combines the parts' results into the result one scan of the whole
// array gives, and every process gets that. A corpus of 10^12 uint16 tokens is then read once by the run instead of
// once by each rank (2 TB each), and a bad id anywhere stops every rank with the same message.
//
// The ranks must read the same corpus: one file on a shared filesystem, or identical copies. Each part is checked
// against the corpus as every other rank describes it (path, dtype, token, sequence and document counts, the ids
// allowed), so another corpus, another copy's shape or another vocabulary is an error; a copy of the same shape with
// other token ids in another rank's part is not seen.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "data/token_scan.h"

namespace sg::data {

// What one process makes of every part's text (in part order), and what every process gets back.
using ScanCombine = std::function<std::string(const std::vector<std::string>& parts)>;

struct ScanShare {
  int part = 0;
  int parts = 1;  // 1: this process scans every corpus whole, alone
  // Passes this part's `mine`; one process applies `combine` to every part's, and every process returns what it made
  // (the data-parallel ranks' rendezvous store: train/distributed_run.h corpus_scan_share). Called by every part for
  // every corpus its loaders open and scan, in the same order.
  std::function<std::string(const std::string& mine, const ScanCombine& combine)> exchange;

  bool shared() const { return parts > 1; }
};

// Tokens [begin, end) of a part: whole chunks of `chunk_tokens`, as even as they come (a part may get none).
struct PartRange {
  uint64_t begin = 0;
  uint64_t end = 0;
};
PartRange scan_part_range(uint64_t num_tokens, uint64_t chunk_tokens, int part, int parts);

// A part's result as it travels between the processes. `corpus` describes the corpus as the part's process sees it,
// so that parts of different corpora (or of differently checked ones) are not combined.
struct PartScan {
  std::string corpus;
  uint64_t num_tokens = 0;  // of the whole array
  PartRange range;
  TokenScan scan;  // positions in the whole array
};
std::string encode_part_scan(const PartScan& part);
PartScan decode_part_scan(const std::string& text);  // sg::Error when it is not one

// The whole array's scan from its parts' (in part order): the smallest and largest id over the parts that hold
// tokens, and the first bad id of the lowest part that has one. sg::Error, naming the parts, when they are not
// parts of one array (another corpus description, another size, ranges that do not tile it).
TokenScan combine_part_scans(const std::vector<PartScan>& parts);

// The combined result as it travels back: the scan, or the error combining the parts raised (every process then
// raises it).
std::string encode_combined_scan(const TokenScan& scan);
std::string encode_combined_error(const std::string& message);
TokenScan decode_combined_scan(const std::string& text);  // throws the encoded error as sg::Error

// scan_token_array of this process's part when share.shared(), then combine_part_scans of every part's through
// share.exchange; scan_token_array of the whole array otherwise. `corpus`: the array's description (PartScan).
TokenScan scan_token_array_shared(TokenDtype dtype, const uint8_t* data, uint64_t num_tokens, int64_t allowed_min,
                                  int64_t allowed_max, const ScanShare& share, const std::string& corpus,
                                  const TokenScanOptions& options = {});

}  // namespace sg::data
