#pragma once
// The token scan of a corpus (data/token_scan.h), shared by the processes of a data-parallel run: each scans one
// contiguous part of the token array, and every part's result goes to every process, which combines them into the
// result one scan of the whole array gives. A corpus of 10^12 uint16 tokens is then read once by the run instead of
// once by each rank (2 TB each), and a bad id anywhere stops every rank with the same message.
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "data/token_scan.h"

namespace sg::data {

struct ScanShare {
  int part = 0;
  int parts = 1;  // 1: this process scans every corpus whole, alone
  // Every part's `mine`, in part order, once every part has passed its own (an all-gather: the data-parallel ranks'
  // rendezvous store, train/distributed_run.h corpus_scan_share). Called once a corpus, by every part, in the same
  // order of corpora.
  std::function<std::vector<std::string>(const std::string& mine)> exchange;

  bool shared() const { return parts > 1; }
};

// Tokens [begin, end) of a part: whole chunks of `chunk_tokens`, as even as they come (a part may get none).
struct PartRange {
  uint64_t begin = 0;
  uint64_t end = 0;
};
PartRange scan_part_range(uint64_t num_tokens, uint64_t chunk_tokens, int part, int parts);

// A part's result as it travels between the processes, and back. `label` names the corpus (its .bin) so that parts
// of different corpora are not combined.
struct PartScan {
  std::string label;
  uint64_t num_tokens = 0;  // of the whole array
  PartRange range;
  TokenScan scan;  // positions in the whole array
};
std::string encode_part_scan(const PartScan& part);
PartScan decode_part_scan(const std::string& text);  // sg::Error when it is not one

// The whole array's scan from its parts' (in part order): the smallest and largest id over the parts that hold
// tokens, and the first bad id of the lowest part that has one. sg::Error, naming the parts, when they are not
// parts of one array (another corpus, another size, ranges that do not tile it).
TokenScan combine_part_scans(const std::vector<PartScan>& parts);

// scan_token_array of this process's part when share.shared(), then combine_part_scans of every part's through
// share.exchange; scan_token_array of the whole array otherwise.
TokenScan scan_token_array_shared(TokenDtype dtype, const uint8_t* data, uint64_t num_tokens, int64_t allowed_min,
                                  int64_t allowed_max, const ScanShare& share, const TokenScanOptions& options = {});

}  // namespace sg::data
