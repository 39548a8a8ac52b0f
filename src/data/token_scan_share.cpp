#include "data/token_scan_share.h"

#include <algorithm>
#include <limits>
#include <sstream>

#include "core/error.h"
#include "core/strings.h"

namespace sg::data {

PartRange scan_part_range(uint64_t num_tokens, uint64_t chunk_tokens, int part, int parts) {
  SG_CHECK(parts >= 1 && part >= 0 && part < parts && chunk_tokens > 0,
           strprintf("scan_part_range: part %d of %d, chunk of %llu tokens", part, parts,
                     static_cast<unsigned long long>(chunk_tokens)));
  // Whole chunks, so a part's scan splits into the chunks one scan of the whole array would take.
  const uint64_t chunks = (num_tokens + chunk_tokens - 1) / chunk_tokens;
  const auto boundary = [&](int p) {
    const uint64_t chunk =
        chunks / static_cast<uint64_t>(parts) * static_cast<uint64_t>(p) +
        chunks % static_cast<uint64_t>(parts) * static_cast<uint64_t>(p) / static_cast<uint64_t>(parts);
    return std::min(num_tokens, chunk * chunk_tokens);
  };
  return {boundary(part), boundary(part + 1)};
}

std::string encode_part_scan(const PartScan& part) {
  // Numbers on the first line, the label (a path, which may hold spaces) on the second.
  return strprintf("%llu %llu %llu %lld %lld %d %llu %lld\n%s", static_cast<unsigned long long>(part.num_tokens),
                   static_cast<unsigned long long>(part.range.begin), static_cast<unsigned long long>(part.range.end),
                   static_cast<long long>(part.scan.min_token), static_cast<long long>(part.scan.max_token),
                   part.scan.first_bad ? 1 : 0, static_cast<unsigned long long>(part.scan.first_bad.value_or(0)),
                   static_cast<long long>(part.scan.bad_token), part.label.c_str());
}

PartScan decode_part_scan(const std::string& text) {
  const size_t newline = text.find('\n');
  std::istringstream numbers(text.substr(0, newline));
  PartScan part;
  unsigned long long tokens = 0, begin = 0, end = 0, first_bad = 0;
  long long lo = 0, hi = 0, bad = 0;
  int has_bad = 0;
  std::string rest;
  if (newline == std::string::npos || !(numbers >> tokens >> begin >> end >> lo >> hi >> has_bad >> first_bad >> bad) ||
      (numbers >> rest) || begin > end || end > tokens || (has_bad != 0 && has_bad != 1)) {
    throw Error("a rank's part of a corpus scan is not one: \"" + text + "\"");
  }
  part.label = text.substr(newline + 1);
  part.num_tokens = tokens;
  part.range = {begin, end};
  part.scan.min_token = lo;
  part.scan.max_token = hi;
  if (has_bad) part.scan.first_bad = first_bad;
  part.scan.bad_token = bad;
  return part;
}

TokenScan combine_part_scans(const std::vector<PartScan>& parts) {
  SG_CHECK(!parts.empty(), "combine_part_scans: no parts");
  const auto describe = [&](size_t p) {
    return strprintf("rank %zu scanned tokens [%llu, %llu) of %s, %llu tokens", p,
                     static_cast<unsigned long long>(parts[p].range.begin),
                     static_cast<unsigned long long>(parts[p].range.end), parts[p].label.c_str(),
                     static_cast<unsigned long long>(parts[p].num_tokens));
  };
  uint64_t expected_begin = 0;
  for (size_t p = 0; p < parts.size(); ++p) {
    if (parts[p].label != parts[0].label || parts[p].num_tokens != parts[0].num_tokens ||
        parts[p].range.begin != expected_begin) {
      throw Error("the ranks' parts of a corpus scan are not parts of one corpus: " + describe(0) + ", but " +
                  describe(p) +
                  ". Every rank must open the same datasets in the same order, from the same files (the same "
                  "dataset.* keys, and files every node sees alike)");
    }
    expected_begin = parts[p].range.end;
  }
  if (expected_begin != parts[0].num_tokens) {
    throw Error("the ranks' parts of a corpus scan do not cover it: " + describe(parts.size() - 1));
  }
  TokenScan all;
  int64_t lo = std::numeric_limits<int64_t>::max(), hi = std::numeric_limits<int64_t>::min();
  for (const PartScan& part : parts) {
    if (part.range.begin == part.range.end) continue;  // no tokens: its min and max are placeholders
    lo = std::min(lo, part.scan.min_token);
    hi = std::max(hi, part.scan.max_token);
    if (part.scan.first_bad && !all.first_bad) {  // parts in array order: the lowest holds the first
      all.first_bad = part.scan.first_bad;
      all.bad_token = part.scan.bad_token;
    }
  }
  if (lo <= hi) {
    all.min_token = lo;
    all.max_token = hi;
  }
  return all;
}

TokenScan scan_token_array_shared(TokenDtype dtype, const uint8_t* data, uint64_t num_tokens, int64_t allowed_min,
                                  int64_t allowed_max, const ScanShare& share, const TokenScanOptions& options) {
  if (!share.shared()) return scan_token_array(dtype, data, num_tokens, allowed_min, allowed_max, options);
  SG_CHECK(static_cast<bool>(share.exchange), "scan_token_array_shared: a shared scan without an exchange");
  const uint64_t item = token_dtype_size(dtype);
  const uint64_t chunk = options.chunk_tokens > 0 ? options.chunk_tokens : kScanChunkBytes / item;
  PartScan mine;
  mine.label = options.label;
  mine.num_tokens = num_tokens;
  mine.range = scan_part_range(num_tokens, chunk, share.part, share.parts);
  TokenScanOptions part_options = options;
  part_options.label = strprintf("%s (rank %d's part of %d)", options.label.c_str(), share.part, share.parts);
  mine.scan = scan_token_array(dtype, data + mine.range.begin * item, mine.range.end - mine.range.begin, allowed_min,
                               allowed_max, part_options);
  if (mine.scan.first_bad) *mine.scan.first_bad += mine.range.begin;
  const std::vector<std::string> texts = share.exchange(encode_part_scan(mine));
  SG_CHECK(texts.size() == static_cast<size_t>(share.parts),
           strprintf("scan_token_array_shared: %zu parts came back from the exchange, expected %d", texts.size(),
                     share.parts));
  std::vector<PartScan> parts;
  parts.reserve(texts.size());
  for (const std::string& text : texts) parts.push_back(decode_part_scan(text));
  return combine_part_scans(parts);
}

}  // namespace sg::data
